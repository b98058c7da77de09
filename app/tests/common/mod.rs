//! What every test of the real `tradetune` binary needs.

#![allow(dead_code)] // each test file uses its own subset

pub mod cv_study;
pub mod panels;
pub mod snapshots;
pub mod ui;

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs the real binary from a directory outside the checkout, so nothing it reads by default
/// (the bundled sample, presets) may depend on the working directory.
pub fn tradetune(args: &[&str]) -> Output {
    tradetune_with(args, &[])
}

/// [`tradetune`] with the environment variables `vars` set for the process.
pub fn tradetune_with(args: &[&str], vars: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tradetune"))
        .args(args)
        .envs(vars.iter().copied())
        .current_dir(std::env::temp_dir())
        .output()
        .expect("the tradetune binary runs")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory `suite/name` under cargo's per-target temp dir for a test's files.
/// The output of a successful `--json` command, one JSON object per line (its output in the
/// message where it failed or a line is not JSON).
pub fn json_events(o: &Output) -> Vec<serde_json::Value> {
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

pub fn scratch(suite: &str, name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(suite)
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Whether wgpu has an adapter here for a test that needs one; without one the test prints a
/// loud SKIP, unless `TRADETUNE_REQUIRE_GPU=1` (CI, which installs Mesa's software Vulkan)
/// makes that a failure.
pub fn wgpu_here(test: &str) -> bool {
    tradetune_engine::device::wgpu_for_test(test).is_some()
}

/// A stand-in for a peer's Python (torch is not in CI): a shell script that logs its
/// arguments to `args.log` beside it (prefixed `script-exists` when its first argument, the
/// peer script, exists), prints a line of chatter, then `result` as its last line, as the
/// peer protocol of `benches/peers/README.md` says.
pub fn fake_peer(dir: &std::path::Path, result: &str) -> PathBuf {
    let path = dir.join("fake-python");
    let log = dir.join("args.log");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n\
             test -f \"$1\" && echo \"script-exists $*\" >> '{log}'\n\
             echo 'Using cpu device'\n\
             echo '{result}'\n",
            log = log.display()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    path
}

/// Ends a test whose child `tradetune` did not end in time: the panic's message says what the
/// process was doing (each thread's name, state and kernel wait channel from `/proc`, and every
/// thread's stack where `gdb` is installed) and what it wrote on a piped stderr. The child is
/// killed first, so a hung one does not outlive the test.
pub fn hung(child: &mut std::process::Child, what: &str) -> ! {
    let pid = child.id();
    let mut dump = String::new();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default();
    for task in tasks {
        let read = |f: &str| {
            std::fs::read_to_string(task.join(f))
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|e| format!("({e})"))
        };
        // The state is the field after the parenthesised name in `stat`.
        let stat = read("stat");
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split(' ').next())
            .unwrap_or("?")
            .to_owned();
        dump.push_str(&format!(
            "  thread {} '{}': state {state}, waiting in {}\n",
            task.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
            read("comm"),
            read("wchan"),
        ));
    }
    let stacks = Command::new("timeout")
        .args(["60", "gdb", "-batch", "-p", &pid.to_string()])
        .args(["-ex", "thread apply all bt 30"])
        .output()
        .map(|o| match text(&o.stdout) {
            out if out.contains("Thread ") => out,
            _ => format!("(no stacks: gdb said {})", text(&o.stderr).trim()),
        })
        .unwrap_or_else(|e| format!("(no stacks: gdb did not run: {e})"));
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    panic!("{what}\nthe process's threads:\n{dump}\n{stacks}\nits stderr:\n{err}");
}
