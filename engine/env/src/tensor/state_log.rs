//! Env 0's state after every step of a run, logged on the device and read back once: what an
//! evaluation's curves are made of (its agent and equal-weight values, the fees and the units
//! held, from which the host prices the trades).
//!
//! A logged step is one launch, the env's kernel writing the new state's row into the log's
//! next row itself ([`TensorVecEnv::step_logging_state`]; a second launch, the row's copy, where
//! the step is not the kernel), where computing the curves on the device took a dozen small ones
//! a step (the holdings before and after, their difference priced and summed, the values and
//! fees sliced out and concatenated into a row): on a GPU each launch costs the host more than
//! its arithmetic, and an evaluation steps one env over every bar of its split.

use burn::tensor::Tensor;

use super::state::{LAST_DONE, PREV_EQW, PREV_VALUE, SCALARS, STEP_FEES, state_width};
use super::{TensorStep, TensorVecEnv};
use crate::EnvError;

/// Env 0's float state, a row a logged step, on the device ([`TensorVecEnv::state_log`]).
#[derive(Debug, Clone)]
pub struct StateLog {
    /// `[rows, width]`, written in place.
    rows: Tensor<2>,
    /// `[1]` env 0's bar when the log was made (as f32: bars are exact below 2²⁴).
    bar: Tensor<1>,
    m: usize,
}

/// One logged state of env 0, decoded on the host.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedState {
    /// The bar it is at.
    pub bar: usize,
    /// Its portfolio value and the equal-weight portfolio's value at that bar.
    pub value: f32,
    pub equal_weight_value: f32,
    /// Fees paid by the step that led to it.
    pub fees: f32,
    /// Whether that step ended the episode (the state is then the next episode's).
    pub done: bool,
    /// `[M]` units held.
    pub holdings: Vec<f32>,
}

impl TensorVecEnv {
    /// A log of `rows` states of env 0, its first row the current state (one launch, and two
    /// for its bar). [`Self::step_logging_state`] (or [`Self::log_state`]) writes the others.
    pub fn state_log(&self, rows: usize) -> StateLog {
        let width = state_width(self.t.m);
        let mut log = StateLog {
            rows: Tensor::zeros([rows.max(1), width], &self.t.device),
            bar: self.state.icol(super::state::BAR).slice(0..1).float(),
            m: self.t.m,
        };
        self.log_state(&mut log, 0);
        log
    }

    /// Writes env 0's current state into row `row` of `log`, in place: one launch.
    pub fn log_state(&self, log: &mut StateLog, row: usize) {
        let width = state_width(self.t.m);
        let state = match self.t.n {
            1 => self.state.f.clone(),
            _ => self.state.f.clone().slice([0..1, 0..width]),
        };
        log.rows
            .inplace(|rows| rows.slice_assign([row..row + 1, 0..width], state));
    }

    /// [`Self::step_tensors`], then env 0's new state written into row `row` of `log`, as
    /// [`Self::log_state`] would, but by the step's own kernel where the step is one: a launch
    /// for both. The episode log is left as it was (the step's episode statistics are not
    /// logged).
    pub fn step_logging_state(
        &mut self,
        actions: Tensor<2>,
        log: &mut StateLog,
        row: usize,
    ) -> TensorStep {
        // A log of another env's width, or a row past its end, is a caller's mistake: said
        // here, not left to the kernel's writes.
        assert_eq!(
            log.m, self.t.m,
            "a state log of {} assets stepped by an env of {}",
            log.m, self.t.m
        );
        assert!(
            row < log.rows.dims()[0],
            "state log row {row} of {}",
            log.rows.dims()[0]
        );
        #[cfg(feature = "wgpu")]
        if self.kernel {
            // The kernel's log is `[C, fields, envs]`: the whole state as the fields of one env
            // (a reshape of the log, no copy).
            let rows = std::mem::replace(&mut log.rows, Tensor::empty([0, 0], &self.t.device));
            let [n, width] = rows.dims();
            let (step, rows) = self.kernel_step(actions, rows.reshape([n, width, 1]), row, true);
            log.rows = rows.reshape([n, width]);
            self.row_in_log = false;
            return step;
        }
        let step = self.step_tensors(actions);
        self.log_state(log, row);
        step
    }
}

impl StateLog {
    /// Everything to read back, `[1 + rows · width]`: the first bar, then the rows (alone or
    /// concatenated with other values, to pay one read).
    pub fn values(&self) -> Tensor<1> {
        let [rows, width] = self.rows.dims();
        Tensor::cat(
            vec![self.bar.clone(), self.rows.clone().reshape([rows * width])],
            0,
        )
    }

    /// The logged states from the host copy of [`Self::values`], the bar of row `t` the first
    /// row's plus `t` (a step advances one bar; a state after an episode's end is logged with
    /// `done` set and its bar then means nothing).
    pub fn decode(&self, host: &[f32]) -> Result<Vec<LoggedState>, EnvError> {
        let [rows, width] = self.rows.dims();
        if host.len() != 1 + rows * width {
            return Err(EnvError::Tensor(format!(
                "state log: {} values read back, expected {}",
                host.len(),
                1 + rows * width
            )));
        }
        let first = host[0] as usize;
        let m = self.m;
        Ok(host[1..]
            .chunks_exact(width)
            .enumerate()
            .map(|(t, row)| LoggedState {
                bar: first + t,
                value: row[PREV_VALUE],
                equal_weight_value: row[PREV_EQW],
                fees: row[STEP_FEES],
                done: row[LAST_DONE] > 0.5,
                holdings: row[SCALARS..SCALARS + m].to_vec(),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;

    use crate::bench::bench_dataset;
    use crate::{EnvConfig, TensorVecEnv};

    /// The log holds the state after each step: the values, fees and holdings the env itself
    /// reports, the bar advancing one a step; a host copy of another length is refused.
    #[test]
    fn the_log_holds_each_steps_state_and_refuses_a_short_read() {
        let device = Device::flex();
        let data = bench_dataset(60, 3, 2, 7);
        let cfg = EnvConfig::new().with_n_envs(2).with_seed(1);
        let mut env = TensorVecEnv::new(cfg, &data, 0..60, &device).unwrap();
        env.reset_tensors();
        let mut log = env.state_log(3);
        let host_of = |t: burn::tensor::Tensor<2>| t.into_data().try_to_vec::<f32>().unwrap();
        let mut expected = Vec::new();
        let read = |env: &TensorVecEnv| {
            let (v, e) = env.values();
            let v = v.into_data().try_to_vec::<f32>().unwrap()[0];
            let e = e.into_data().try_to_vec::<f32>().unwrap()[0];
            let hold = host_of(env.holdings());
            (v, e, hold[..3].to_vec())
        };
        expected.push(read(&env));
        for t in 1..3 {
            let actions = burn::tensor::Tensor::<2>::full([2, 3], 0.5, &device);
            env.step_tensors(actions);
            env.log_state(&mut log, t);
            expected.push(read(&env));
        }
        let host = log.values().into_data().try_to_vec::<f32>().unwrap();
        let states = log.decode(&host).unwrap();
        assert_eq!(states.len(), 3);
        for (t, (state, (value, eqw, hold))) in states.iter().zip(&expected).enumerate() {
            assert_eq!(state.value, *value, "row {t}");
            assert_eq!(state.equal_weight_value, *eqw, "row {t}");
            assert_eq!(&state.holdings, hold, "row {t}");
            assert_eq!(state.bar, states[0].bar + t, "row {t}");
            assert!(!state.done, "row {t}");
        }
        assert!(
            states[2].holdings.iter().any(|&h| h > 0.0),
            "buying at half strength holds something: {states:?}"
        );
        assert!(states[1].fees > 0.0, "{states:?}");
        let err = log.decode(&host[1..]).unwrap_err().to_string();
        assert!(
            err.contains("state log") && err.contains("expected"),
            "{err}"
        );
    }
}
