//! Installs the launcher for the current user: the desktop entry (with `Exec` pointing at
//! this binary) under `$XDG_DATA_HOME/applications`, the icon under the hicolor theme, and
//! optionally a copy on the desktop, executable and marked trusted where `gio` exists (GNOME
//! shows an untrusted launcher as a text file).

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The application id: the desktop entry's file name without `.desktop`, which Wayland
/// compositors use to find the window's icon.
pub const APP_ID: &str = "tradetune";

/// The window icon, installed with the desktop entry.
pub const ICON_PNG: &[u8] = include_bytes!("../../resources/icon/tradetune.png");

/// The bundled desktop entry; `Exec=` is rewritten to the installed binary's path.
pub const DESKTOP_ENTRY: &str = include_str!("../../resources/desktop/tradetune.desktop");

/// Where things go.
#[derive(Debug, Clone)]
pub struct InstallPlan {
    /// The binary the launcher runs.
    pub exe: PathBuf,
    /// `$XDG_DATA_HOME` (`~/.local/share`).
    pub data_home: PathBuf,
    /// The desktop folder, when a desktop copy is wanted.
    pub desktop: Option<PathBuf>,
}

/// What was written.
#[derive(Debug, Clone, Default)]
pub struct Installed {
    /// Files written, in order.
    pub files: Vec<PathBuf>,
    /// Notes for people (e.g. why the desktop copy is not marked trusted).
    pub notes: Vec<String>,
}

/// The plan for this user and this binary.
pub fn default_plan(on_desktop: bool) -> anyhow::Result<InstallPlan> {
    let exe = std::env::current_exe().context("finding this program's path")?;
    let data_home = dirs::data_dir().context("no user data directory (is $HOME set?)")?;
    let desktop = if on_desktop {
        Some(dirs::desktop_dir().context("no desktop directory (XDG_DESKTOP_DIR)")?)
    } else {
        None
    };
    Ok(InstallPlan {
        exe,
        data_home,
        desktop,
    })
}

/// `arg` as one argument of a desktop entry's `Exec` (the Desktop Entry Specification's
/// rules): `%` doubled (it starts a field code), the argument quoted where it holds a reserved
/// character, and inside the quotes `"`, `` ` `` and `$` escaped by a backslash and a
/// backslash by another, each of those backslashes then doubled for the key file's own string
/// escape, which applies first (GLib refuses a value holding `\$`).
fn exec_arg(arg: &str) -> String {
    let arg = arg.replace('%', "%%");
    let reserved = |c: char| " \t\n\"'\\><~|&;$*?#()`".contains(c);
    if !arg.chars().any(reserved) {
        return arg;
    }
    let mut quoted = String::from("\"");
    for c in arg.chars() {
        match c {
            // The quoting rule's `\"`, its backslash doubled for the key file.
            '"' | '`' | '$' => {
                quoted.push_str("\\\\");
                quoted.push(c);
            }
            '\\' => quoted.push_str("\\\\\\\\"),
            '\n' => quoted.push_str("\\n"),
            _ => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// The desktop entry with `Exec` set to `exe` (quoted and escaped as the specification asks
/// where the path holds a space or another reserved character).
pub fn desktop_entry_for(exe: &Path) -> String {
    let exec = exec_arg(&exe.display().to_string());
    DESKTOP_ENTRY
        .lines()
        .map(|line| {
            if line.starts_with("Exec=") {
                format!("Exec={exec}")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Carries out `plan`.
pub fn install(plan: &InstallPlan) -> anyhow::Result<Installed> {
    let mut done = Installed::default();
    let entry = desktop_entry_for(&plan.exe);
    let apps = plan.data_home.join("applications");
    let entry_path = apps.join(format!("{}.desktop", APP_ID));
    write(&entry_path, entry.as_bytes())?;
    done.files.push(entry_path);
    let icon_path = plan
        .data_home
        .join("icons/hicolor/256x256/apps")
        .join(format!("{}.png", APP_ID));
    write(&icon_path, ICON_PNG)?;
    done.files.push(icon_path);
    if let Some(desktop) = &plan.desktop {
        let path = desktop.join(format!("{}.desktop", APP_ID));
        write(&path, entry.as_bytes())?;
        make_executable(&path)?;
        match std::process::Command::new("gio")
            .args(["set", &path.display().to_string(), "metadata::trusted", "true"])
            .output()
        {
            Ok(out) if out.status.success() => {
                done.notes.push("desktop launcher marked trusted (gio)".into())
            }
            Ok(out) => done.notes.push(format!(
                "gio could not mark the launcher trusted: {}; right-click it and choose \"Allow Launching\"",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(_) => done
                .notes
                .push("gio is not installed: the desktop may ask to trust the launcher once".into()),
        }
        done.files.push(path);
    }
    Ok(done)
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

#[cfg(unix)]
fn make_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .permissions();
    perms.set_mode(perms.mode() | 0o755);
    std::fs::set_permissions(path, perms).with_context(|| format!("chmod {}", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> anyhow::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path with a space, `$`, `%`, a quote or a backslash was written as it is (quoted
    /// only for a space, nothing escaped): a launcher that ran another command or none.
    #[test]
    fn the_exec_line_quotes_and_escapes_what_the_specification_reserves() {
        let exec = |p: &str| {
            desktop_entry_for(Path::new(p))
                .lines()
                .find_map(|l| l.strip_prefix("Exec=").map(str::to_owned))
                .unwrap()
        };
        assert_eq!(exec("/opt/tradetune/tradetune"), "/opt/tradetune/tradetune");
        assert_eq!(exec("/opt/my apps/tradetune"), "\"/opt/my apps/tradetune\"");
        assert_eq!(exec("/opt/100%/tradetune"), "/opt/100%%/tradetune");
        assert_eq!(exec("/opt/$x/tradetune"), "\"/opt/\\\\$x/tradetune\"");
        assert_eq!(exec("/opt/a\"b/t"), "\"/opt/a\\\\\"b/t\"");
        assert_eq!(exec("/opt/a\\b/t"), "\"/opt/a\\\\\\\\b/t\"");
    }
}
