//! What a study file makes for the runner: its sampler, its pruner, its devices with their
//! memory, and the runner's settings.

use std::path::PathBuf;

use super::{PrunerKind, SamplerKind, StudyFile, StudyFileError};
use crate::pruner::{
    HyperbandPruner, NopPruner, PercentilePruner, Pruner, SuccessiveHalvingPruner,
};
use crate::runner::{DeviceSlot, RunnerConfig};
use crate::sampler::{EnqueuedSampler, GridSampler, RandomSampler, Sampler, TpeConfig, TpeSampler};
use tradetune_device::DeviceSpec;

impl StudyFile {
    /// The sampler the file asks for (enqueued trials first when listed).
    pub fn build_sampler(&self) -> Result<Box<dyn Sampler>, StudyFileError> {
        let s = &self.sampler;
        let inner: Box<dyn Sampler> = match s.kind {
            SamplerKind::Random => Box::new(RandomSampler::new(s.seed)),
            SamplerKind::Tpe => {
                let d = TpeConfig::default();
                let cfg = TpeConfig {
                    seed: s.seed,
                    n_startup_trials: s.n_startup_trials.unwrap_or(d.n_startup_trials),
                    n_ei_candidates: s.n_ei_candidates.unwrap_or(d.n_ei_candidates),
                    multivariate: s.multivariate.unwrap_or(d.multivariate),
                    constant_liar: s.constant_liar.unwrap_or(d.constant_liar),
                    ..d
                };
                Box::new(
                    TpeSampler::new(cfg).map_err(|e| self.key_error("sampler", e.to_string()))?,
                )
            }
            SamplerKind::Grid => Box::new(
                GridSampler::new(self.grid.clone(), &self.space, s.seed).map_err(|e| {
                    // Without a [sampler.grid] table, at the line that chose the grid.
                    let key = if super::line_of(&self.text, "sampler.grid").is_some() {
                        "sampler.grid"
                    } else {
                        "sampler.kind"
                    };
                    self.key_error(key, e.to_string())
                })?,
            ),
        };
        if self.enqueued.is_empty() {
            return Ok(inner);
        }
        Ok(Box::new(
            EnqueuedSampler::new(self.enqueued.clone(), &self.space, inner)
                .map_err(|e| self.key_error("sampler.enqueue", e.to_string()))?,
        ))
    }

    /// The pruner the file asks for.
    pub fn build_pruner(&self) -> Result<Box<dyn Pruner>, StudyFileError> {
        let p = &self.pruner;
        let e = |e: crate::pruner::PrunerError| self.key_error("pruner", e.to_string());
        Ok(match p.kind {
            PrunerKind::None => Box::new(NopPruner),
            PrunerKind::Median => Box::new(
                PercentilePruner::median(p.n_startup_trials, p.n_warmup_steps, p.interval_steps)
                    .map_err(e)?,
            ),
            PrunerKind::Percentile => Box::new(
                PercentilePruner::new(
                    p.percentile,
                    p.n_startup_trials,
                    p.n_warmup_steps,
                    p.interval_steps,
                    1,
                )
                .map_err(e)?,
            ),
            PrunerKind::SuccessiveHalving => Box::new(
                SuccessiveHalvingPruner::new(p.min_resource, p.reduction_factor.unwrap_or(4), 0, 0)
                    .map_err(e)?,
            ),
            PrunerKind::Hyperband => Box::new(
                HyperbandPruner::new(
                    p.min_resource.unwrap_or(1),
                    p.max_resource,
                    p.reduction_factor.unwrap_or(3),
                    0,
                )
                .map_err(e)?,
            ),
        })
    }

    /// The devices of `[study] devices`, with their memory: the host's RAM for the CPU (the
    /// file's `device_memory_gib` where it cannot be read), `device_memory_gib` for GPUs (None
    /// when the file gives none: no budget check there, as their memory is not detected yet).
    pub fn device_slots(&self, devices: &[String]) -> Result<Vec<DeviceSlot>, StudyFileError> {
        let class = self
            .study
            .device_memory_gib
            .map(|g| (g * (1u64 << 30) as f64) as u64);
        devices
            .iter()
            .map(|d| {
                let spec: DeviceSpec = d.parse().map_err(|e: tradetune_device::DeviceError| {
                    self.key_error("study.devices", e.to_string())
                })?;
                let memory = match spec {
                    DeviceSpec::Cpu => tradetune_device::memory::host_memory_bytes().or(class),
                    _ => class,
                };
                Ok(DeviceSlot::new(spec, memory))
            })
            .collect()
    }

    /// The runner settings of this file, writing into `storage`.
    pub fn runner_config(
        &self,
        storage: impl Into<PathBuf>,
    ) -> Result<RunnerConfig, StudyFileError> {
        let mut c = RunnerConfig::new(self.study.name.clone(), storage);
        c.direction = self.direction();
        c.n_trials = self.study.n_trials;
        c.workers = self.study.workers;
        c.devices = self.device_slots(&self.study.devices)?;
        c.assignment = self.study.assignment;
        c.gpu_sharing = self.study.gpu_sharing;
        c.memory_fraction = self.study.memory_fraction;
        Ok(c)
    }
}
