//! [`FlatAdam`]'s checkpoint: its moments and step counter in the format of burn's
//! `ModuleOptimizer` with `Adam` (one state per parameter), so checkpoints stay burn's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use burn::module::Module;
use burn::optim::{Adam, AdamState, AdaptiveMomentumState};
use burn::optim::{GradientsParams, LearningRate, ModuleOptimizer, Optimizer};
use burn::tensor::{Device, Tensor};

use super::{FlatAdam, FlatValues};
use crate::ppo::error::PpoError;
use crate::ppo::model::ActorCritic;

impl FlatAdam {
    /// Saves the moments `moments` and the step counter to a burnpack file, in the format of
    /// burn's `ModuleOptimizer` with `Adam` (one state per parameter of `model`).
    pub fn save(
        &self,
        model: &ActorCritic,
        moments: Option<(Tensor<1>, Tensor<1>)>,
        path: &std::path::Path,
    ) -> Result<(), PpoError> {
        let mut optim = ModuleOptimizer::from(StateBridge {
            time: self.time,
            read_times: Arc::new(Mutex::new(Vec::new())),
            saving: true,
        });
        if let Some((m1, m2)) = &moments {
            let mut stacked = GradientsParams::new();
            for slot in &self.slots {
                let part = |m: &Tensor<1>| m.clone().narrow(0, slot.offset, slot.len);
                match slot.shape.num_dims() {
                    1 => stacked.register::<1>(slot.id, Tensor::cat(vec![part(m1), part(m2)], 0)),
                    2 => stacked.register::<2>(
                        slot.id,
                        Tensor::cat(
                            vec![
                                part(m1).reshape(slot.shape.clone()),
                                part(m2).reshape(slot.shape.clone()),
                            ],
                            0,
                        ),
                    ),
                    _ => {}
                }
            }
            let _ = optim.step(0.0, model.clone(), stacked);
        }
        optim.save(path).map_err(|e| PpoError::Checkpoint {
            path: path.display().to_string(),
            reason: format!("{e:?}"),
        })
    }

    /// Restores the moments and the step counter from a burnpack file (see [`Self::save`]),
    /// for the parameters of `model` on `device`.
    pub fn load(
        &mut self,
        model: &ActorCritic,
        path: &std::path::Path,
        device: &Device,
    ) -> Result<(), PpoError> {
        let times = Arc::new(Mutex::new(Vec::new()));
        let mut optim = ModuleOptimizer::from(StateBridge {
            time: 0,
            read_times: times.clone(),
            saving: false,
        })
        .load(path)
        .map_err(|e| PpoError::Checkpoint {
            path: path.display().to_string(),
            reason: format!("{e:?}"),
        })?;
        let inner = device.clone().inner();
        let mut zeros = GradientsParams::new();
        for slot in &self.slots {
            match slot.shape.num_dims() {
                1 => zeros.register::<1>(slot.id, Tensor::zeros(slot.shape.clone(), &inner)),
                2 => zeros.register::<2>(slot.id, Tensor::zeros(slot.shape.clone(), &inner)),
                _ => {}
            }
        }
        let read = optim.step(0.0, model.clone(), zeros);
        let time = times.lock().ok().and_then(|t| t.iter().copied().max());
        let Some(time) = time else {
            self.moments = None;
            self.time = 0;
            return Ok(());
        };
        let mut values = FlatValues(HashMap::new());
        read.visit(&mut values);
        let (mut m1, mut m2) = (Vec::new(), Vec::new());
        for slot in &self.slots {
            match values.0.remove(&slot.id) {
                Some(v) if v.dims()[0] == 2 * slot.len => {
                    m1.push(v.clone().narrow(0, 0, slot.len));
                    m2.push(v.narrow(0, slot.len, slot.len));
                }
                // A parameter without a recorded state starts from zero moments.
                _ => {
                    m1.push(Tensor::zeros([slot.len], &inner));
                    m2.push(Tensor::zeros([slot.len], &inner));
                }
            }
        }
        self.moments = Some((self.join(m1, &inner), self.join(m2, &inner)));
        self.time = time;
        Ok(())
    }
}

/// Adam's state record (burn's `ModuleOptimizer` format, one `AdamState` per parameter) to and
/// from [`FlatAdam`]: an optimiser whose "step" writes the moments passed in as the gradient
/// (`[m1; m2]` stacked along the first axis) into its state, or reads its state out as the new
/// value (same stacking), so checkpoints stay those of burn's Adam.
#[derive(Clone)]
struct StateBridge {
    /// Saving: the step counter to record.
    time: usize,
    /// Loading: the step counters read, one per parameter with a state.
    read_times: Arc<Mutex<Vec<usize>>>,
    /// Whether this writes states (saving) or reads them (loading).
    saving: bool,
}

impl Optimizer for StateBridge {
    type State<const D: usize> = AdamState<D>;

    fn step<const D: usize>(
        &self,
        _lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        if self.saving {
            let n = tensor.dims()[0];
            let m1 = grad.clone().narrow(0, 0, n);
            let m2 = grad.narrow(0, n, n);
            let state = AdamState::new(AdaptiveMomentumState::new(self.time, m1, m2));
            return (tensor, Some(state));
        }
        match state {
            Some(s) => {
                if let Ok(mut times) = self.read_times.lock() {
                    times.push(s.momentum.time);
                }
                let stacked = Tensor::cat(
                    vec![s.momentum.moment_1.clone(), s.momentum.moment_2.clone()],
                    0,
                );
                (stacked, Some(s))
            }
            None => (tensor, None),
        }
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &Device) -> Self::State<D> {
        <Adam as Optimizer>::to_device(state, device)
    }
}
