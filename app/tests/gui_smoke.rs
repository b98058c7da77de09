//! The real binary, with no arguments, opens its window under Xvfb, draws frames and exits
//! cleanly; and `install-desktop` writes a launcher the desktop accepts.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{scratch, text, tradetune};

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Whether a test needing `program` runs: CI sets `TRADETUNE_REQUIRE_GUI=1` (and installs
/// it), so there a missing program fails instead of skipping.
fn have(program: &str, package: &str) -> bool {
    if on_path(program) {
        return true;
    }
    let required = std::env::var("TRADETUNE_REQUIRE_GUI").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{program} is not installed (Debian package {package}); TRADETUNE_REQUIRE_GUI=1 requires it"
    );
    eprintln!("skipped: {program} is not installed (apt install {package})");
    false
}

/// Kills the child when dropped, so a failing assertion never leaves an X server behind.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

#[test]
fn the_window_draws_its_first_frames_under_xvfb_and_exits_cleanly() {
    if !have("Xvfb", "xvfb") {
        return;
    }
    let dir = scratch("gui_smoke", "window");
    // Xvfb picks a free display number itself (two test runs at once never share a server)
    // and writes it to its stdout once it accepts connections: wait for that line rather than
    // poll for its socket against a clock.
    let mut xvfb = Killed(
        Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-screen",
                "0",
                "1280x1024x24",
                "-nolisten",
                "tcp",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb starts"),
    );
    let mut said = String::new();
    // Kept open while the server runs, so a later write of Xvfb's never meets a closed pipe.
    let mut xvfb_out = std::io::BufReader::new(xvfb.0.stdout.take().expect("a piped stdout"));
    let _ = std::io::BufRead::read_line(&mut xvfb_out, &mut said);
    // An empty line: Xvfb exited before it was ready.
    let display: u32 = said
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("Xvfb did not come up (it said {said:?})"));
    let mut app = Killed(
        Command::new(env!("CARGO_BIN_EXE_tradetune"))
            .args(["--exit-after-frames", "5"])
            .env("DISPLAY", format!(":{display}"))
            .env_remove("WAYLAND_DISPLAY")
            .env("HOME", &dir)
            .env("XDG_DATA_HOME", dir.join("data"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tradetune starts"),
    );
    // The software renderer compiles its shaders on the first frame: allow minutes.
    let status = wait(&mut app.0, Duration::from_secs(300));
    let mut stderr = String::new();
    if let Some(mut pipe) = app.0.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    let status =
        status.unwrap_or_else(|| panic!("tradetune did not exit after its frames\n{stderr}"));
    assert!(status.success(), "tradetune failed: {status}\n{stderr}");
    assert!(stderr.contains("drew 5 frames"), "{stderr}");
    // eframe saved the settings on exit, in the user's data directory.
    let saved = walk(&dir.join("data"));
    assert!(
        saved
            .iter()
            .any(|p| p.to_string_lossy().contains("tradetune")),
        "no saved settings under {}: {saved:?}",
        dir.display()
    );
    drop(xvfb);
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn install_desktop_writes_a_valid_launcher_and_the_icon() {
    let dir = scratch("gui_smoke", "install");
    let data = dir.join("data");
    let desktop = dir.join("Desktop");
    let out = tradetune(&[
        "install-desktop",
        "--data-home",
        data.to_str().unwrap(),
        "--desktop",
        "--desktop-dir",
        desktop.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let entry = data.join("applications/tradetune.desktop");
    let icon = data.join("icons/hicolor/256x256/apps/tradetune.png");
    let launcher = desktop.join("tradetune.desktop");
    let body = std::fs::read_to_string(&entry).unwrap();
    let exe = env!("CARGO_BIN_EXE_tradetune");
    assert!(body.contains(&format!("Exec={exe}")), "{body}");
    assert!(body.contains("Icon=tradetune"));
    assert_eq!(std::fs::read(&icon).unwrap()[..8], *b"\x89PNG\r\n\x1a\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&launcher).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o111,
            0o111,
            "the desktop launcher must be executable"
        );
    }
    if have("desktop-file-validate", "desktop-file-utils") {
        let v = Command::new("desktop-file-validate")
            .arg(&entry)
            .output()
            .unwrap();
        assert!(v.status.success(), "{}{}", text(&v.stdout), text(&v.stderr));
    }
}

#[test]
fn install_desktop_names_the_folder_it_cannot_write() {
    let dir = scratch("gui_smoke", "install_bad");
    let file = dir.join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let out = tradetune(&["install-desktop", "--data-home", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("not-a-dir"), "{err}");
}

/// The Debian package (`cargo deb -p tradetune`) ships the binary, the desktop entry and the
/// icon; the entry it ships is the one `desktop-file-validate` checks in CI, and every file
/// it names exists (the binary once `cargo build --release` has run).
#[test]
fn the_debian_package_ships_the_binary_the_entry_and_the_icon() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(dir.join("Cargo.toml")).unwrap()).unwrap();
    let deb = &manifest["package"]["metadata"]["deb"];
    let assets: Vec<(String, String)> = deb["assets"]
        .as_array()
        .expect("[package.metadata.deb] assets")
        .iter()
        .map(|a| {
            let a = a.as_array().unwrap();
            (
                a[0].as_str().unwrap().to_owned(),
                a[1].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let dest = |src: &str| {
        assets
            .iter()
            .find(|(s, _)| s == src)
            .map(|(_, d)| d.as_str())
            .unwrap_or_else(|| panic!("{src} is not in the package: {assets:?}"))
    };
    assert_eq!(dest("target/release/tradetune"), "usr/bin/");
    assert_eq!(
        dest("../resources/desktop/tradetune.desktop"),
        "usr/share/applications/"
    );
    assert_eq!(
        dest("../resources/icon/tradetune.png"),
        "usr/share/icons/hicolor/256x256/apps/"
    );
    for (src, _) in &assets {
        if !src.starts_with("target/") {
            assert!(dir.join(src).is_file(), "{src} does not exist");
        }
    }
    // The icon is the size its directory says, and the entry names it and the binary.
    let png = std::fs::read(dir.join("../resources/icon/tradetune.png")).unwrap();
    let (w, h) = (
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        u32::from_be_bytes(png[20..24].try_into().unwrap()),
    );
    assert_eq!((w, h), (256, 256));
    let entry =
        std::fs::read_to_string(dir.join("../resources/desktop/tradetune.desktop")).unwrap();
    assert!(entry.lines().any(|l| l == "Exec=tradetune"), "{entry}");
    assert!(entry.lines().any(|l| l == "Icon=tradetune"), "{entry}");
}
