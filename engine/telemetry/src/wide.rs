//! One row per sample with a column per device and metric — the CSV shape of the user's
//! GPU-monitor script, done right: every column names its unit (`gpu0_util_pct`,
//! `gpu0_mem_used_mib`, `cpu_pct`, `rss_mib`), timestamps are UTC, missing values are empty.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::TelemetryError;
use super::metric::{DeviceTag, Metric};
use super::sampler::Tick;

/// Which columns a wide CSV has.
#[derive(Debug, Clone, PartialEq)]
pub struct WideLayout {
    gpus: u32,
    cores: usize,
}

impl WideLayout {
    /// `gpus` cards (`gpu0` … `gpu{gpus-1}`), `cores` CPU cores.
    pub fn new(gpus: u32, cores: usize) -> WideLayout {
        WideLayout { gpus, cores }
    }

    fn columns(&self) -> Vec<(DeviceTag, Metric)> {
        let mut cols = Vec::new();
        for g in 0..self.gpus {
            cols.extend(Metric::GPU.iter().map(|m| (DeviceTag::Gpu(g), *m)));
        }
        cols.extend(
            [Metric::CpuPct, Metric::ProcessCpuPct, Metric::RssMib]
                .into_iter()
                .map(|m| (DeviceTag::Host, m)),
        );
        cols.extend((0..self.cores).map(|c| (DeviceTag::Host, Metric::CoreCpuPct(c as u16))));
        cols
    }

    pub fn header(&self) -> Vec<String> {
        let mut h = vec!["timestamp_utc".to_string()];
        h.extend(self.columns().iter().map(|(d, m)| m.column(*d)));
        h.push("trial".into());
        h
    }

    pub fn record(&self, tick: &Tick) -> Vec<String> {
        let mut r = vec![
            tick.timestamp
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ];
        r.extend(
            self.columns()
                .iter()
                .map(|(d, m)| tick.get(*d, *m).map(format_value).unwrap_or_default()),
        );
        r.push(tick.trial.map(|t| t.to_string()).unwrap_or_default());
        r
    }
}

/// Three decimals are below every sensor's resolution (1 % , 1 MHz, 1 mW).
pub fn format_value(v: f64) -> String {
    let rounded = (v * 1000.0).round() / 1000.0;
    format!("{rounded}")
}

/// A CSV file written tick by tick.
pub struct CsvLog<W: Write> {
    writer: csv::Writer<W>,
    layout: WideLayout,
    path: String,
}

impl CsvLog<File> {
    /// Creates (truncates) `path` and writes the header.
    pub fn create(path: &Path, layout: WideLayout) -> Result<CsvLog<File>, TelemetryError> {
        let name = path.display().to_string();
        let writer = csv::Writer::from_path(path).map_err(|source| TelemetryError::Csv {
            path: name.clone(),
            source,
        })?;
        CsvLog::new(writer, layout, name)
    }
}

impl<W: Write> CsvLog<W> {
    /// Wraps `writer` (named `path` in errors) and writes the header.
    pub fn new(
        writer: csv::Writer<W>,
        layout: WideLayout,
        path: String,
    ) -> Result<CsvLog<W>, TelemetryError> {
        let mut log = CsvLog {
            writer,
            layout,
            path,
        };
        let header = log.layout.header();
        log.write(&header)?;
        Ok(log)
    }

    fn write(&mut self, record: &[String]) -> Result<(), TelemetryError> {
        self.writer
            .write_record(record)
            .map_err(|source| TelemetryError::Csv {
                path: self.path.clone(),
                source,
            })
    }

    /// Appends one tick and flushes, so a log cut short by Ctrl-C keeps every finished row.
    pub fn write_tick(&mut self, tick: &Tick) -> Result<(), TelemetryError> {
        let record = self.layout.record(tick);
        self.write(&record)?;
        self.writer.flush().map_err(|e| TelemetryError::Csv {
            path: self.path.clone(),
            source: e.into(),
        })
    }

    pub fn into_inner(self) -> Result<W, TelemetryError> {
        let path = self.path;
        self.writer.into_inner().map_err(|e| TelemetryError::Csv {
            path,
            source: e.into_error().into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::super::source::DeviceReading;
    use super::*;

    #[test]
    fn header_and_record_line_up_with_units_and_blanks() {
        let layout = WideLayout::new(1, 2);
        let header = layout.header();
        assert_eq!(header[0], "timestamp_utc");
        assert_eq!(header[1], "gpu0_util_pct");
        assert!(header.contains(&"gpu0_mem_used_mib".to_string()));
        assert!(header.contains(&"gpu0_sm_clock_mhz".to_string()));
        assert!(header.contains(&"cpu1_pct".to_string()));
        assert_eq!(header.last().unwrap(), "trial");
        let tick = Tick {
            seq: 1,
            timestamp: Utc.timestamp_opt(1_700_000_000, 250_000_000).unwrap(),
            trial: Some(7),
            running: Vec::new(),
            readings: vec![
                DeviceReading {
                    device: DeviceTag::Gpu(0),
                    values: vec![(Metric::UtilPct, 97.0), (Metric::PowerW, 215.123456)],
                },
                DeviceReading {
                    device: DeviceTag::Host,
                    values: vec![(Metric::RssMib, 512.5)],
                },
            ],
            skipped: vec![],
            problems: vec![],
        };
        let rec = layout.record(&tick);
        assert_eq!(rec.len(), header.len());
        let col = |name: &str| rec[header.iter().position(|h| h == name).unwrap()].clone();
        assert_eq!(col("timestamp_utc"), "2023-11-14T22:13:20.250Z");
        assert_eq!(col("gpu0_util_pct"), "97");
        assert_eq!(col("gpu0_power_w"), "215.123");
        assert_eq!(col("gpu0_temp_c"), "");
        assert_eq!(col("rss_mib"), "512.5");
        assert_eq!(col("trial"), "7");
        let mut log = CsvLog::new(
            csv::Writer::from_writer(Vec::new()),
            layout,
            "memory".into(),
        )
        .unwrap();
        log.write_tick(&tick).unwrap();
        let text = String::from_utf8(log.into_inner().unwrap()).unwrap();
        assert_eq!(text.lines().count(), 2);
    }
}
