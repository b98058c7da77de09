//! Trials' stored telemetry as one wide CSV (`tradetune study export --telemetry`, the app's
//! Studies tab).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use super::FrontError;
use crate::storage::{Storage, TrialRecord};
use crate::telemetry::{DeviceReading, DeviceTag, Metric, Tick, WideLayout};

/// What an export wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exported {
    /// Rows written (sample times × trials).
    pub rows: usize,
    /// Stored samples of sources or metrics this build does not know, left out.
    pub skipped: usize,
}

/// `study` as a part of a file name (`trials-<study>.csv`): a name that a study file would
/// refuse (one stored by Optuna, say) has each path separator and each `..` replaced by `_`,
/// and an empty one is `_`, so the file stays in the folder it was asked in.
pub fn file_name_part(study: &str) -> String {
    let part = study.replace(['/', '\\', '\0'], "_").replace("..", "_");
    if part.trim().is_empty() {
        "_".into()
    } else {
        part
    }
}

/// One stored telemetry value: device, metric, value.
type Sample = (DeviceTag, Metric, f64);

/// One row per sample time and trial, a column per device and metric (units in the names:
/// `gpu0_util_pct`, `gpu0_mem_used_mib`, `cpu_pct`, `rss_mib`), and the trial's number. At
/// least `gpu0` columns are written, empty on a machine without a GPU, so every export of a
/// study has the same leading columns.
pub fn export_telemetry(
    storage: &Storage,
    trials: &[TrialRecord],
    path: &Path,
) -> Result<Exported, FrontError> {
    let mut ticks: BTreeMap<(chrono::NaiveDateTime, i64), Vec<Sample>> = BTreeMap::new();
    let mut gpus = 1u32;
    let mut cores = 0usize;
    let mut skipped = 0usize;
    for t in trials {
        for s in storage.telemetry(Some(t.trial_id))? {
            let (Ok(device), Some(metric)) =
                (s.source.parse::<DeviceTag>(), Metric::from_name(&s.metric))
            else {
                skipped += 1;
                continue;
            };
            if let DeviceTag::Gpu(i) = device {
                gpus = gpus.max(i + 1);
            }
            if let Metric::CoreCpuPct(c) = metric {
                cores = cores.max(c as usize + 1);
            }
            ticks
                .entry((s.recorded_at, t.number))
                .or_default()
                .push((device, metric, s.value));
        }
    }
    let layout = WideLayout::new(gpus, cores);
    let fail = |e: csv::Error| FrontError::file(path, format!("cannot write it: {e}"));
    write_replacing(path, |file| {
        write_wide(csv::Writer::from_writer(file), &layout, &ticks)
            .map_err(fail)
            .map(|()| Exported {
                rows: ticks.len(),
                skipped,
            })
    })
}

/// The wide CSV of `ticks` (one row per sample time and trial) to `w`.
fn write_wide(
    mut w: csv::Writer<&mut File>,
    layout: &WideLayout,
    ticks: &BTreeMap<(chrono::NaiveDateTime, i64), Vec<Sample>>,
) -> Result<(), csv::Error> {
    w.write_record(layout.header())?;
    for (seq, ((at, number), values)) in ticks.iter().enumerate() {
        let mut readings: Vec<DeviceReading> = Vec::new();
        for (device, metric, value) in values {
            match readings.iter_mut().find(|r| r.device == *device) {
                Some(r) => r.values.push((*metric, *value)),
                None => readings.push(DeviceReading {
                    device: *device,
                    values: vec![(*metric, *value)],
                }),
            }
        }
        let tick = Tick {
            seq: seq as u64 + 1,
            timestamp: at.and_utc(),
            trial: Some(*number as u64),
            running: Vec::new(),
            readings,
            skipped: Vec::new(),
            problems: Vec::new(),
        };
        w.write_record(layout.record(&tick))?;
    }
    w.flush()?;
    Ok(())
}

/// Writes `path` whole or not at all: `write` fills a temporary file beside it (same folder,
/// so the rename cannot cross file systems), which replaces `path` only once everything is
/// written and synced. On any error the temporary is removed and a previous `path` is left as
/// it was, so a failed export (a full disk, a database error) never leaves half a CSV behind
/// under the name a reader expects.
///
/// A `path` that is a SQLite database is refused: an export's or a backtest's file named
/// where the study database is (`--trials runs/a.db`, a slip of tab completion) would replace
/// every study in it with a CSV. So is one that holds market data, a folder, and one inside a
/// checkpoint (`--equity-csv ck/model.bpk` replaced the weights).
pub fn write_replacing<T>(
    path: &Path,
    write: impl FnOnce(&mut File) -> Result<T, FrontError>,
) -> Result<T, FrontError> {
    let name = path
        .file_name()
        .ok_or_else(|| FrontError::file(path, "not a file name"))?;
    if let Some(why) = crate::market::source::database_in_the_way(path)
        .or_else(|| crate::market::source::market_data_in_the_way(path))
    {
        return Err(FrontError::file(path, why));
    }
    if path.is_dir() {
        return Err(FrontError::file(
            path,
            "is a folder: give a file name (inside it, or beside it)",
        ));
    }
    // A file of a checkpoint (its weights, its configuration), named by a slip: the curves or
    // the export would replace it, and the checkpoint would no longer load.
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // Any checkpoint's, this build's layout or not (one it cannot read is still the user's).
    if folder.join("state.json").is_file() && folder.join("model.bpk").is_file() {
        return Err(FrontError::file(
            path,
            format!(
                "is inside the checkpoint {}: writing there would replace or add to its files; \
                 choose a file outside it",
                folder.display()
            ),
        ));
    }
    let tmp: PathBuf = path.with_file_name(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = File::create(&tmp)
        .map_err(|e| FrontError::file(path, format!("cannot write it: {e}")))
        .and_then(|mut file| {
            let out = write(&mut file)?;
            file.sync_all()
                .map_err(|e| FrontError::file(path, format!("cannot write it: {e}")))?;
            Ok(out)
        })
        .and_then(|out| {
            std::fs::rename(&tmp, path)
                .map_err(|e| FrontError::file(path, format!("cannot replace it: {e}")))?;
            Ok(out)
        });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Writes `bytes` to `path` whole or not at all ([`write_replacing`]).
pub fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), FrontError> {
    write_replacing(path, |file| {
        std::io::Write::write_all(file, bytes)
            .map_err(|e| FrontError::file(path, format!("cannot write it: {e}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_study_name_in_a_file_name_stays_one_path_component() {
        for (name, want) in [
            ("cpu", "cpu"),
            ("../x", "__x"),
            ("/tmp/x", "_tmp_x"),
            ("a\\b", "a_b"),
            ("", "_"),
            ("..", "_"),
        ] {
            let part = file_name_part(name);
            assert_eq!(part, want, "{name}");
            let path = Path::new("/out").join(format!("trials-{part}.csv"));
            assert_eq!(path.parent(), Some(Path::new("/out")), "{name}");
        }
    }

    /// Market data (a CSV with open, high, low and close; a headerless Binance kline export;
    /// a gzip file) is never written over; an earlier export is.
    #[test]
    fn market_data_is_not_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let e = write_whole(&path, b"number,value\n").map(|()| std::fs::read(&path).unwrap());
            (e, std::fs::read(&path).unwrap())
        };
        for (name, bytes) in [
            (
                "a.csv",
                &b"\"Date\";Open;High;Low;Close;Volume\n1;1;2;0.5;1.5;9\n"[..],
            ),
            (
                "k.csv",
                b"1500004800000,1,2,0.5,1.5,9,1500008399999,9,9,9,9,0\n",
            ),
            ("z.csv.gz", b"\x1f\x8b\x08\x00rest"),
            (
                "bom.csv",
                b"\xef\xbb\xbfOpen,High,Low,Close,Date\n1,2,0.5,1.5,2020-01-02\n",
            ),
        ] {
            let (result, left) = write(name, bytes);
            let e = result.unwrap_err().to_string();
            assert!(
                e.contains(name) && e.contains("choose another file name"),
                "{e}"
            );
            assert_eq!(left, bytes, "{name}");
        }
        let (result, _) = write("trials.csv", b"number,value,params_ppo.gamma\n0,1,0.9\n");
        assert_eq!(result.unwrap(), b"number,value\n");
    }

    #[test]
    fn a_failed_write_leaves_the_previous_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trials.csv");
        std::fs::write(&path, "number,value\n0,1.5\n").unwrap();
        let e = write_replacing(&path, |f| {
            f.write_all(b"number,value\n0,")
                .map_err(|e| FrontError::file(&path, e))?;
            Err::<(), _>(FrontError::Invalid("the database went away".into()))
        })
        .unwrap_err();
        assert!(e.to_string().contains("went away"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "number,value\n0,1.5\n"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["trials.csv"], "the temporary was removed");

        write_replacing(&path, |f| {
            f.write_all(b"number,value\n0,2.5\n")
                .map_err(|e| FrontError::file(&path, e))
        })
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "number,value\n0,2.5\n"
        );
    }
}
