//! Where a PostgreSQL database is: `postgresql://user[:password]@host[:port]/dbname` (or
//! `postgres://`, and libpq's query parameters such as `?connect_timeout=5`), the password
//! found as libpq finds it, and the form that may be printed (never the password).
//!
//! Password lookup, in libpq's order (https://www.postgresql.org/docs/15/libpq-pgpass.html):
//! the URL's, then `PGPASSWORD`, then the password file (`PGPASSFILE`, else `~/.pgpass`), whose
//! lines are `hostname:port:database:username:password` with `*` matching anything and `\`
//! escaping `:` and `\`. As libpq does, a password file readable by group or others is ignored.
//! Connections are made without TLS: a URL asking for it (`sslmode=require`) is refused by the
//! client with a message saying so.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use postgres::config::Host;
use postgres::{Config, NoTls};

use super::DbError;
use super::postgres::PgConn;

/// Whether `location` names a PostgreSQL database rather than a SQLite file.
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgresql://") || location.starts_with("postgres://")
}

/// A parsed PostgreSQL location.
pub struct PgTarget {
    config: Config,
    /// `postgresql://user@host:port/dbname`: printed in messages, stored in settings.
    pub display: String,
    /// `host:port`, named in connection errors.
    pub host: String,
}

impl std::fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTarget")
            .field("display", &self.display)
            .finish()
    }
}

/// The location without its password (what TradeTune prints and saves).
pub fn redact(location: &str) -> String {
    if !is_postgres_url(location) {
        return location.to_owned();
    }
    match parse(location) {
        Ok(t) => t.display,
        // Unparsable: drop everything between the scheme and '@' so nothing secret survives.
        Err(_) => match (location.find("://"), location.rfind('@')) {
            (Some(s), Some(a)) if a > s => format!("{}{}", &location[..s + 3], &location[a + 1..]),
            _ => location.to_owned(),
        },
    }
}

fn host_name(h: &Host) -> String {
    match h {
        Host::Tcp(name) => name.clone(),
        Host::Unix(path) => path.display().to_string(),
    }
}

/// The URL's user, else libpq's default (`PGUSER`, else the login name).
fn user_of(config: &Config) -> String {
    match config.get_user() {
        Some(u) => u.to_owned(),
        None => std::env::var("PGUSER")
            .ok()
            .or_else(|| std::env::var("USER").ok())
            .unwrap_or_else(|| "postgres".to_owned()),
    }
}

/// Whether two PostgreSQL URLs name one database: the same user, hosts, ports, database and
/// options once libpq's defaults are filled in (`postgres://` or `postgresql://`, port 5432
/// written or not). The password is neither compared nor looked up; a URL that does not parse
/// is compared as text.
pub fn same_database(a: &str, b: &str) -> bool {
    /// User, hosts, ports, database, options.
    type Key = (String, Vec<String>, Vec<u16>, String, Option<String>);
    fn key(url: &str) -> Option<Key> {
        let config: Config = url.parse().ok()?;
        let user = user_of(&config);
        let hosts = match config.get_hosts() {
            [] => vec!["localhost".to_owned()],
            hosts => hosts.iter().map(host_name).collect(),
        };
        let ports = match config.get_ports() {
            [] => vec![5432],
            ports => ports.to_vec(),
        };
        let dbname = config.get_dbname().unwrap_or(&user).to_owned();
        Some((
            user,
            hosts,
            ports,
            dbname,
            config.get_options().map(str::to_owned),
        ))
    }
    match (key(a), key(b)) {
        (Some(a), Some(b)) => a == b,
        _ => a == b,
    }
}

/// Parses the URL and fills in the password from the environment or the password file.
pub fn parse(url: &str) -> Result<PgTarget, String> {
    if raw_at_in_credentials(url) {
        return Err(
            "the part before the host holds more than one '@' (a password with '@' \
                    in it?): write each '@' of the user or password as %40, or leave the \
                    password out of the URL and set PGPASSWORD or use ~/.pgpass"
                .to_owned(),
        );
    }
    let mut config: Config = url.parse().map_err(|e| {
        format!("not a PostgreSQL URL (postgresql://user[:password]@host[:port]/dbname): {e}")
    })?;
    let user = user_of(&config);
    config.user(&user);
    let host = config
        .get_hosts()
        .first()
        .map(host_name)
        .unwrap_or_else(|| "localhost".to_owned());
    if config.get_hosts().is_empty() {
        config.host("localhost");
    }
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let dbname = config.get_dbname().unwrap_or(&user).to_owned();
    if config.get_password().is_none() {
        if let Ok(p) = std::env::var("PGPASSWORD") {
            config.password(p);
        } else if let Some(p) = pgpass_password(&host, port, &dbname, &user) {
            config.password(p);
        }
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    config.application_name("tradetune");
    Ok(PgTarget {
        display: format!("postgresql://{user}@{host}:{port}/{dbname}"),
        host: format!("{host}:{port}"),
        config,
    })
}

/// Whether the URL's user and password hold a raw '@': the host then starts at the first one
/// (tokio-postgres, as libpq) and the rest of the password would show as the host's name. The
/// authority runs from the first '@' to the first '/' after it (a password may hold '/'); an
/// '@' in the database name or the query string is not the credentials'.
fn raw_at_in_credentials(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let rest = rest.split_once('?').map_or(rest, |(before, _)| before);
    let Some(first) = rest.find('@') else {
        return false;
    };
    let end = rest[first..].find('/').map_or(rest.len(), |i| first + i);
    rest[..end].matches('@').count() > 1
}

fn pgpass_file() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PGPASSFILE") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass"))
}

/// The password of the first matching line of the password file, as libpq reads it.
fn pgpass_password(host: &str, port: u16, dbname: &str, user: &str) -> Option<String> {
    let path = pgpass_file()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).ok()?.permissions().mode();
        if mode & 0o077 != 0 {
            let _ = writeln!(
                std::io::stderr(),
                "warning: password file {} has group or world access; permissions should be u=rw (0600) or less — ignored",
                path.display()
            );
            return None;
        }
    }
    let text = std::fs::read_to_string(&path).ok()?;
    pgpass_lookup(&text, host, port, dbname, user)
}

/// The password of the first line matching (host, port, database, user).
pub fn pgpass_lookup(
    text: &str,
    host: &str,
    port: u16,
    dbname: &str,
    user: &str,
) -> Option<String> {
    let port = port.to_string();
    // libpq matches a Unix-socket connection against `localhost`.
    let host = if host.starts_with('/') {
        "localhost"
    } else {
        host
    };
    let wanted = [host, port.as_str(), dbname, user];
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .find_map(|line| {
            let fields = split_pgpass(line);
            if fields.len() < 5 {
                return None;
            }
            let matches = fields[..4]
                .iter()
                .zip(wanted)
                .all(|(f, w)| f == "*" || f == w);
            matches.then(|| fields[4..].join(":"))
        })
}

fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next()
                    && let Some(f) = fields.last_mut()
                {
                    f.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c);
                }
            }
        }
    }
    fields
}

fn connect_error(target: &PgTarget, e: &postgres::Error) -> DbError {
    let reason = super::postgres::describe(e);
    let tls = if reason.contains("TLS") || reason.contains("ssl") {
        " (TradeTune connects without TLS: use sslmode=disable or prefer, or an SSH tunnel)"
    } else {
        ""
    };
    DbError::Connect(format!(
        "cannot connect to PostgreSQL at {} ({}): {reason}{tls}",
        target.host, target.display
    ))
}

/// Connects, naming the host and the reason when it cannot. With `create_missing`, a database
/// that does not exist yet is created first (as a SQLite file would be), which needs the
/// `CREATEDB` privilege.
pub fn connect(target: &PgTarget, create_missing: bool) -> Result<PgConn, DbError> {
    use postgres::error::SqlState;
    let client = match target.config.connect(NoTls) {
        Ok(c) => c,
        Err(e) if create_missing && e.code() == Some(&SqlState::INVALID_CATALOG_NAME) => {
            create_database(target)?;
            target
                .config
                .connect(NoTls)
                .map_err(|e| connect_error(target, &e))?
        }
        Err(e) => return Err(connect_error(target, &e)),
    };
    Ok(PgConn {
        client,
        statements: Default::default(),
        again: None,
        reconnects: 0,
        lost: false,
    })
}

/// A new client for `target` (its database exists: this connects again after the server
/// closed a connection), its session set up with `session`.
pub fn connect_again(target: &PgTarget, session: &str) -> Result<postgres::Client, DbError> {
    let mut client = target
        .config
        .connect(NoTls)
        .map_err(|e| connect_error(target, &e))?;
    client.batch_execute(session)?;
    Ok(client)
}

/// Creates the database `target` names, through the server's `postgres` maintenance database;
/// returns false when it already exists.
pub fn create_database(target: &PgTarget) -> Result<bool, DbError> {
    let mut config = target.config.clone();
    config.dbname("postgres");
    let mut admin = config
        .connect(NoTls)
        .map_err(|e| connect_error(target, &e))?;
    let name = target.config.get_dbname().unwrap_or_default().to_owned();
    let exists = !admin
        .query("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])?
        .is_empty();
    if exists {
        return Ok(false);
    }
    let quoted = format!("\"{}\"", name.replace('"', "\"\""));
    match admin.batch_execute(&format!("CREATE DATABASE {quoted}")) {
        Ok(()) => Ok(true),
        // Another worker created it in between.
        Err(e) if e.code() == Some(&postgres::error::SqlState::DUPLICATE_DATABASE) => Ok(false),
        Err(e) => Err(DbError::Connect(format!(
            "cannot create database {name} on {}: {}",
            target.host,
            super::postgres::describe(&e)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_never_holds_the_password() {
        let t = parse("postgresql://alice:s3cret@db.example:6543/studies").unwrap();
        assert_eq!(t.display, "postgresql://alice@db.example:6543/studies");
        assert_eq!(t.host, "db.example:6543");
        assert_eq!(redact("postgres://bob:pw@h/x"), "postgresql://bob@h:5432/x");
        assert_eq!(redact("studies.db"), "studies.db");
        assert!(!redact("postgresql://a:b@@@").contains(":b"));
    }

    #[test]
    fn pgpass_matches_like_libpq() {
        let text = "# comment\n\
                    other:5432:*:alice:nope\n\
                    db.example:6543:studies:alice:pa\\:ss:word\n\
                    *:*:*:*:fallback\n";
        assert_eq!(
            pgpass_lookup(text, "db.example", 6543, "studies", "alice").as_deref(),
            Some("pa:ss:word")
        );
        assert_eq!(
            pgpass_lookup(text, "db.example", 5432, "studies", "alice").as_deref(),
            Some("fallback")
        );
        assert_eq!(pgpass_lookup("h:1:d:u\n", "h", 1, "d", "u"), None);
    }

    #[test]
    fn a_raw_at_in_the_password_is_refused_without_showing_the_password() {
        let url = "postgresql://alice:Secr3t@Pw@127.0.0.1:1/x";
        let e = parse(url).err().unwrap_or_default();
        assert!(e.contains("%40") && e.contains("PGPASSWORD"), "{e}");
        let shown = redact(url);
        assert!(
            !shown.contains("Secr3t") && !shown.contains("Pw"),
            "{shown}"
        );
        // Encoded, it is the password it says.
        let t = parse("postgresql://alice:Secr3t%40Pw@127.0.0.1:1/x").unwrap();
        assert_eq!(t.config.get_password(), Some(&b"Secr3t@Pw"[..]));
        assert_eq!(t.display, "postgresql://alice@127.0.0.1:1/x");
        // An '@' in a query string's value or the database's name is not the credentials'.
        assert!(!raw_at_in_credentials("postgresql://h/db?user=alice@corp"));
        assert!(!raw_at_in_credentials("postgresql://alice@host/my@db"));
        assert!(!raw_at_in_credentials("postgresql://alice:p/w@host/db"));
        // Though the query holds one too, or the password a '/'.
        assert!(raw_at_in_credentials(
            "postgresql://alice:p@ss@host/db?sslmode=require&application_name=a@b"
        ));
        assert!(raw_at_in_credentials("postgresql://alice:p/w@ss@host/db"));
    }

    #[test]
    fn bad_urls_say_what_is_expected() {
        let e = parse("postgresql://u@h:notaport/db").unwrap_err();
        assert!(e.contains("postgresql://user"), "{e}");
    }
}
