//! A launched study followed on the terminal: its events as lines (live bars per worker on a
//! terminal) or as JSON, one per line.

use std::collections::BTreeMap;
use std::sync::mpsc::Receiver;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use tradetune_engine::front::launch::LaunchEvent;
use tradetune_engine::storage::TrialState;
use tradetune_engine::study::runner::{StudyEvent, StudyReport};

/// What a study run (or a worker, `what`) that has ended leaves as its exit status, after its
/// summary: interrupted by a signal (130 for Ctrl-C, 143 for SIGTERM), or every trial it ran
/// FAILED (1, with the first failure's reason); otherwise success (trials pruned or complete,
/// or none left to run).
pub fn outcome(report: &StudyReport, what: &str) -> anyhow::Result<()> {
    if let Some(ending) = crate::signals::interrupted_ending(what) {
        return Err(ending.into());
    }
    all_failed(report)
}

/// An error when the run ran trials and every one of them FAILED. A trial failed "not run"
/// (a grid every point of which was tried, found by a late run or worker) was not run: a
/// study with nothing left to run is no failure.
fn all_failed(report: &StudyReport) -> anyhow::Result<()> {
    let ran: Vec<_> = report
        .trials
        .iter()
        .filter(|t| {
            !t.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("not run:"))
        })
        .collect();
    let n = ran.len();
    if let Some(first) = ran.first()
        && ran.iter().all(|t| t.state == TrialState::Fail)
    {
        anyhow::bail!(
            "all {n} trials of this run failed; trial #{} (the first to end) failed with: {}",
            first.number,
            first.reason.as_deref().unwrap_or("no reason recorded")
        )
    }
    Ok(())
}

/// Follows a launched study to its end, printing its events (text lines with live bars per
/// worker, or JSON); `on_ready` prints what to say once its data has loaded (given where the
/// data came from). Notices go to stderr.
pub fn drive(
    events: Receiver<LaunchEvent>,
    json: bool,
    mut on_ready: impl FnMut(&str),
) -> anyhow::Result<StudyReport> {
    // Live bars per worker on a terminal; plain lines otherwise.
    let multi = MultiProgress::new();
    let mut bars: BTreeMap<usize, ProgressBar> = BTreeMap::new();
    let say = |line: String| {
        if multi.is_hidden() {
            outln!("{line}");
        } else {
            let _ = multi.println(line);
        }
    };
    // The live compile line on a terminal, under the workers' bars.
    let mut compile_bar: Option<ProgressBar> = None;
    let mut compile_lines = crate::cli::CompileLines::default();
    let mut result = None;
    for event in events.iter() {
        let event = match event {
            LaunchEvent::Ready { source, .. } => {
                if !json {
                    on_ready(&source);
                }
                continue;
            }
            LaunchEvent::Notice(line) => {
                errln!("{line}");
                continue;
            }
            LaunchEvent::Finished(r) => {
                result = Some(r);
                continue;
            }
            LaunchEvent::Compiling(status) => {
                if json || multi.is_hidden() {
                    if let Some(line) = compile_lines.plain(&status, json) {
                        outln!("{line}");
                    }
                } else if status.active {
                    let bar = compile_bar.get_or_insert_with(|| {
                        let bar = multi.add(ProgressBar::new_spinner());
                        bar.set_style(
                            ProgressStyle::with_template("{msg}")
                                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                        );
                        bar
                    });
                    bar.set_message(status.to_string());
                } else {
                    if let Some(bar) = compile_bar.take() {
                        bar.finish_and_clear();
                        multi.remove(&bar);
                    }
                    if status.worth_a_line() {
                        let _ = multi.println(status.to_string());
                    }
                }
                continue;
            }
            LaunchEvent::Study(e) => e,
        };
        if json {
            outln!("{}", serde_json::to_string(&event).unwrap_or_default());
            continue;
        }
        match &event {
            StudyEvent::StudyStarted { workers, .. } if !multi.is_hidden() => {
                let style = ProgressStyle::with_template("{prefix:<18} {bar:30} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar());
                for w in workers {
                    let bar = multi.add(ProgressBar::new(1000));
                    bar.set_style(style.clone());
                    bar.set_prefix(format!("worker {} {}", w.worker, w.device));
                    bars.insert(w.worker, bar);
                }
            }
            StudyEvent::WorkerProgress {
                worker,
                number,
                fraction,
                message,
            } => {
                if let Some(bar) = bars.get(worker) {
                    bar.set_position((fraction * 1000.0) as u64);
                    bar.set_message(format!("trial {number}: {message}"));
                }
            }
            _ => {}
        }
        for line in event_lines(&event) {
            say(line);
        }
    }
    for bar in bars.values().chain(compile_bar.as_ref()) {
        bar.finish_and_clear();
    }
    match result {
        Some(r) => Ok(r?),
        None => anyhow::bail!("the study ended without a word (its thread is gone)"),
    }
}

/// The text lines of an event (none for the live-only ones).
fn event_lines(e: &StudyEvent) -> Vec<String> {
    let mut out = Vec::new();
    match e {
        StudyEvent::StudyStarted {
            existing_trials,
            waiting,
            recovered,
            workers,
            n_trials,
            budget_left,
            ..
        } => {
            if !recovered.is_empty() {
                out.push(format!(
                    "recovered {} trial(s) left RUNNING by a dead process, now FAIL: {:?}",
                    recovered.len(),
                    recovered
                ));
            }
            let existing = match waiting {
                0 => format!("{existing_trials} trial(s) already in the study"),
                w if *budget_left == Some(0) => format!(
                    "{existing_trials} trial(s) already in the study, {w} of them enqueued \
                     (WAITING)"
                ),
                w => format!(
                    "{existing_trials} trial(s) already in the study, {w} of them enqueued \
                     (WAITING): they run first"
                ),
            };
            out.push(match budget_left {
                Some(0) => format!("{existing}; its budget is spent: nothing left to run"),
                Some(left) => format!(
                    "{existing}; its budget leaves {} to run, shared with any other worker",
                    (*left).min(*n_trials)
                ),
                None => format!("{existing}; running {n_trials} more"),
            });
            for w in workers {
                out.push(format!("worker {} on {} ({})", w.worker, w.device, w.backend));
            }
        }
        StudyEvent::WorkerWaiting {
            worker,
            device,
            reason,
        } => out.push(format!("worker {worker} on {device} waits: {reason}")),
        StudyEvent::TrialsRecovered { worker, numbers } => out.push(format!(
            "recovered {} trial(s) left RUNNING by a worker that died (its heartbeat went \
             stale), now FAIL: {numbers:?} (found by worker {worker})",
            numbers.len()
        )),
        StudyEvent::TrialCompleted {
            number,
            worker,
            device,
            value,
            duration_s,
            compile_s,
        } => out.push(format!(
            "trial {number:>4} COMPLETE  value {value:>10.5}  worker {worker} on {device}  {duration_s:.1} s{}",
            compiling(*compile_s)
        )),
        StudyEvent::TrialPruned {
            number,
            worker,
            device,
            step,
            value,
            reason,
            duration_s,
            compile_s,
        } => out.push(format!(
            "trial {number:>4} PRUNED    value {:>10}  worker {worker} on {device}  {duration_s:.1} s{}  ({reason}{})",
            value.map_or("-".into(), |v| format!("{v:.5}")),
            compiling(*compile_s),
            step.map_or(String::new(), |s| format!(" at step {s}"))
        )),
        StudyEvent::TrialFailed {
            number,
            worker,
            device,
            reason,
            duration_s,
        } => out.push(format!(
            "trial {number:>4} FAIL      worker {worker} on {device}  {duration_s:.1} s: {reason}"
        )),
        StudyEvent::StudyFinished {
            completed,
            pruned,
            failed,
            stopped,
            ran_out,
            ..
        } => out.push(format!(
            "done: {completed} complete, {pruned} pruned, {failed} failed{}{}",
            if *stopped { " (stopped)" } else { "" },
            if *ran_out {
                " (the sampler has nothing left to try: every point of the grid is tried)"
            } else {
                ""
            }
        )),
        _ => {}
    }
    out
}

/// A trial's compile time as its line shows it: " (12 s compiling)", " (4.0 ms compiling)" on a
/// GPU that compiled ([`crate::cli::seconds`]), nothing elsewhere.
fn compiling(compile_s: Option<f64>) -> String {
    compile_s.map_or(String::new(), |c| {
        format!(" ({} compiling)", crate::cli::seconds(c))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trial_line_shows_its_compile_time_where_it_compiled() {
        let done = |compile_s| StudyEvent::TrialCompleted {
            number: 3,
            worker: 1,
            device: "wgpu:0".into(),
            value: 0.5,
            duration_s: 42.0,
            compile_s,
        };
        assert_eq!(
            event_lines(&done(Some(30.25))),
            ["trial    3 COMPLETE  value    0.50000  worker 1 on wgpu:0  42.0 s (30 s compiling)"]
        );
        // A few milliseconds of compiling are not "0.0 s".
        assert_eq!(
            event_lines(&done(Some(0.004))),
            [
                "trial    3 COMPLETE  value    0.50000  worker 1 on wgpu:0  42.0 s (4.0 ms compiling)"
            ]
        );
        assert_eq!(
            event_lines(&done(None)),
            ["trial    3 COMPLETE  value    0.50000  worker 1 on wgpu:0  42.0 s"]
        );
        let pruned = StudyEvent::TrialPruned {
            number: 4,
            worker: 0,
            device: "wgpu:0".into(),
            step: Some(2),
            value: None,
            reason: "pruned by the pruner".into(),
            duration_s: 20.0,
            compile_s: Some(15.0),
        };
        assert_eq!(
            event_lines(&pruned),
            [
                "trial    4 PRUNED    value          -  worker 0 on wgpu:0  20.0 s (15 s compiling)  (pruned by the pruner at step 2)"
            ]
        );
    }
}
