//! What the sampler samples: anything that yields metric values per device. GPU and host probes
//! are adapted to it here; tests use fake sources.

use super::discovery::GpuDiscovery;
use super::gpu::{GpuProbe, GpuProcess};
use super::host::HostProbe;
use super::metric::{DeviceTag, Metric};

/// The values of one device at one tick.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DeviceReading {
    pub device: DeviceTag,
    pub values: Vec<(Metric, f64)>,
}

impl DeviceReading {
    pub fn get(&self, metric: Metric) -> Option<f64> {
        self.values
            .iter()
            .find(|(m, _)| *m == metric)
            .map(|(_, v)| *v)
    }
}

/// One answer of a source.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceReading {
    pub readings: Vec<DeviceReading>,
    /// Unreadable files or failed calls, for the user (e.g. a malformed sysfs file).
    pub problems: Vec<String>,
    /// The processes on each card whose list was read this time (see [`GpuSample::processes`]).
    ///
    /// [`GpuSample::processes`]: super::gpu::GpuSample::processes
    pub processes: Vec<(DeviceTag, Vec<GpuProcess>)>,
}

/// A probe as the sampler sees it. Runs on its own thread.
pub trait Source: Send + 'static {
    /// Short name for thread names and "skipped" counts (`nvidia`, `amdgpu`, `host`).
    fn name(&self) -> String;
    fn read(&mut self) -> SourceReading;
}

/// A GPU probe whose cards are numbered from `first_index`.
pub struct GpuSource {
    name: String,
    probe: Box<dyn GpuProbe>,
    first_index: u32,
}

impl GpuSource {
    pub fn new(name: impl Into<String>, probe: Box<dyn GpuProbe>, first_index: u32) -> GpuSource {
        GpuSource {
            name: name.into(),
            probe,
            first_index,
        }
    }
}

impl Source for GpuSource {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn read(&mut self) -> SourceReading {
        let mut out = SourceReading::default();
        for (i, sample) in self.probe.sample().into_iter().enumerate() {
            let device = DeviceTag::Gpu(self.first_index + i as u32);
            out.problems
                .extend(sample.problems.iter().map(|p| format!("{device}: {p}")));
            if let Some(list) = &sample.processes {
                out.processes.push((device, list.clone()));
            }
            out.readings.push(DeviceReading {
                device,
                values: sample.metrics(),
            });
        }
        out
    }
}

/// The CPU/process probe.
pub struct HostSource {
    probe: Box<dyn HostProbe>,
}

impl HostSource {
    pub fn new(probe: Box<dyn HostProbe>) -> HostSource {
        HostSource { probe }
    }
}

impl Source for HostSource {
    fn name(&self) -> String {
        "host".into()
    }
    fn read(&mut self) -> SourceReading {
        SourceReading {
            readings: vec![DeviceReading {
                device: DeviceTag::Host,
                values: self.probe.sample().metrics(),
            }],
            problems: Vec::new(),
            processes: Vec::new(),
        }
    }
}

/// Sources for every card of every discovered GPU probe (numbered `gpu0`, `gpu1`, … in
/// discovery order; one source, so one thread and one deadline, per card: see
/// [`GpuProbe::split`]) and the host probe. Sources are named `nvidia gpu0`, `amdgpu gpu1`.
pub fn sources(discovery: GpuDiscovery, host: Option<Box<dyn HostProbe>>) -> Vec<Box<dyn Source>> {
    let mut out: Vec<Box<dyn Source>> = Vec::new();
    let mut next = 0u32;
    for probe in discovery.probes.into_iter().flat_map(GpuProbe::split) {
        let n = probe.devices().len() as u32;
        let vendor = match probe.devices().first().map(|d| d.vendor) {
            Some(super::GpuVendor::Nvidia) => "nvidia",
            Some(super::GpuVendor::Amd) => "amdgpu",
            None => "gpu",
        };
        out.push(Box::new(GpuSource::new(
            format!("{vendor} gpu{next}"),
            probe,
            next,
        )));
        next += n;
    }
    if let Some(h) = host {
        out.push(Box::new(HostSource::new(h)));
    }
    out
}
