//! The arguments the study commands share: the study file or preset, and how a running study
//! shows it is alive; each resolved once into what the engine takes.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tradetune_engine::front::launch::{Liveness, StudyLaunch, StudyPlace};
use tradetune_engine::study::file::StudyFile;
use tradetune_engine::study::ppo_trial::read_study_file;
use tradetune_engine::study::preset;
use tradetune_engine::telemetry::sampler::{MAX_INTERVAL, MIN_INTERVAL};

/// A study file, or a bundled preset instead (`study run`, `create`, `reseed`, `speed`).
#[derive(Debug, Args)]
pub struct StudyFileArgs {
    /// The study file (TOML): it names the study, its data, split and search; see
    /// `tradetune study presets` for the bundled ones.
    #[arg(conflicts_with = "preset", required_unless_present = "preset")]
    pub file: Option<PathBuf>,
    /// A bundled preset instead of a file: rtx4080, rtx4080_laptop, rx7900gre, cpu.
    #[arg(long)]
    pub preset: Option<String>,
}

impl StudyFileArgs {
    /// The study of the file or preset.
    pub fn study_file(&self) -> anyhow::Result<StudyFile> {
        match (&self.file, &self.preset) {
            (Some(path), _) => {
                let file = read_study_file(path)?;
                note_unused_settings(&file);
                Ok(file)
            }
            (None, Some(name)) => Ok(preset::find(name)?.study),
            (None, None) => anyhow::bail!("give a study file or --preset NAME"),
        }
    }

    /// The launch of the file's or preset's study, kept in `place`; `--set` overrides laid
    /// over it.
    pub fn launch(&self, place: StudyPlace, set: &[String]) -> anyhow::Result<StudyLaunch> {
        let mut launch = match (&self.file, &self.preset) {
            (Some(path), _) => {
                let launch = StudyLaunch::from_path(path, place)?;
                note_unused_settings(launch.file());
                launch
            }
            (None, Some(name)) => StudyLaunch::from_preset(name, place)?,
            (None, None) => anyhow::bail!("give a study file or --preset NAME"),
        };
        launch.set(set).map_err(|e| anyhow::anyhow!("--set {e}"))?;
        Ok(launch)
    }
}

/// A note on stderr for each `[sampler]` or `[pruner]` setting the file's kinds do not use:
/// not refused, but the user who wrote it expects it to do something.
fn note_unused_settings(file: &StudyFile) {
    for unused in file.unused_settings() {
        errln!("note: {unused}");
    }
}

/// Heartbeats and telemetry of a running study (`study run` and `worker`).
#[derive(Debug, Args)]
pub struct LivenessArgs {
    /// Seconds between heartbeats of a running trial.
    #[arg(long, default_value_t = 10.0)]
    pub heartbeat: f64,
    /// A RUNNING trial whose heartbeat is older than this many seconds was left by a dead
    /// process (or worker) and is marked FAIL before the next trial starts.
    #[arg(long, default_value_t = 60.0)]
    pub stale_after: f64,
    /// Seconds between telemetry samples stored with the study, 0.1 to 60 (0 = no device
    /// sampling; each trial's phases, samples/s and verdict are stored either way).
    #[arg(long, default_value_t = 1.0)]
    pub telemetry_interval: f64,
}

impl LivenessArgs {
    /// The engine's liveness settings.
    pub fn liveness(&self) -> anyhow::Result<Liveness> {
        let heartbeat = seconds(self.heartbeat, "--heartbeat")?;
        let stale_after = seconds(self.stale_after, "--stale-after")?;
        // Said with the flags' names (the engine checks it too, naming its settings).
        anyhow::ensure!(
            stale_after > heartbeat,
            "--stale-after ({} s) must be longer than --heartbeat ({} s): a trial whose beat is \
             older than --stale-after is taken for a dead worker's and failed",
            self.stale_after,
            self.heartbeat
        );
        Ok(Liveness {
            heartbeat,
            stale_after,
            telemetry: telemetry_interval(self.telemetry_interval)?,
        })
    }
}

/// `--telemetry-interval`: 0 for off, else within the sampler's range (it would refuse any
/// other, and the study would run without telemetry).
fn telemetry_interval(v: f64) -> anyhow::Result<Option<Duration>> {
    if v == 0.0 {
        return Ok(None);
    }
    let (min, max) = (MIN_INTERVAL.as_secs_f64(), MAX_INTERVAL.as_secs_f64());
    anyhow::ensure!(
        v.is_finite() && (min..=max).contains(&v),
        "--telemetry-interval: must be 0 (off) or {min} to {max} seconds, got {v}"
    );
    Ok(Some(Duration::from_secs_f64(v)))
}

fn seconds(v: f64, flag: &str) -> anyhow::Result<Duration> {
    // A beat every microsecond would keep the database busy with heartbeats.
    anyhow::ensure!(
        v.is_finite() && v >= 0.1,
        "{flag}: must be at least 0.1 seconds, got {v}"
    );
    Duration::try_from_secs_f64(v).with_context(|| format!("{flag}: {v} s is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn liveness(telemetry_interval: f64) -> anyhow::Result<Liveness> {
        LivenessArgs {
            heartbeat: 10.0,
            stale_after: 60.0,
            telemetry_interval,
        }
        .liveness()
    }

    /// A stale limit no longer than the heartbeat would fail live trials: refused, naming the
    /// flags (not the engine's setting).
    #[test]
    fn a_stale_after_not_longer_than_the_heartbeat_is_refused_by_its_flags() {
        for (heartbeat, stale_after) in [(10.0, 10.0), (10.0, 5.0)] {
            let e = LivenessArgs {
                heartbeat,
                stale_after,
                telemetry_interval: 0.0,
            }
            .liveness()
            .expect_err("stale_after <= heartbeat")
            .to_string();
            assert!(
                e.contains("--stale-after") && e.contains("--heartbeat"),
                "{e}"
            );
        }
    }

    /// A heartbeat of a microsecond would keep the database writing heartbeats: refused below
    /// 0.1 s, naming the flag.
    #[test]
    fn a_heartbeat_below_a_tenth_of_a_second_is_refused() {
        for bad in [0.000001, 0.0, -1.0, f64::NAN] {
            let e = LivenessArgs {
                heartbeat: bad,
                stale_after: 60.0,
                telemetry_interval: 0.0,
            }
            .liveness()
            .expect_err("too short")
            .to_string();
            assert!(
                e.contains("--heartbeat: must be at least 0.1 seconds"),
                "{e}"
            );
        }
    }

    /// An interval the sampler would not use is refused at once, naming the flag and the
    /// range, instead of a study that runs without telemetry.
    #[test]
    fn a_telemetry_interval_out_of_the_samplers_range_is_refused() {
        for bad in [0.05, 61.0, -1.0, f64::NAN] {
            let e = liveness(bad).expect_err("out of range").to_string();
            assert!(
                e.contains("--telemetry-interval") && e.contains("0.1 to 60"),
                "{e}"
            );
        }
        assert_eq!(liveness(0.0).map(|l| l.telemetry).ok(), Some(None));
        for good in [0.1, 1.0, 60.0] {
            assert_eq!(
                liveness(good).map(|l| l.telemetry).ok(),
                Some(Some(Duration::from_secs_f64(good)))
            );
        }
    }
}
