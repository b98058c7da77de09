//! Fixed-capacity ring buffers of one metric, and min/max decimation for plots.
//!
//! A plot 800 pixels wide cannot show 3600 points, and averaging would hide exactly what a user
//! looks for (a utilisation dip, a temperature spike). Min/max decimation keeps, for each of
//! `width / 2` equal slices, the lowest and the highest point in time order — the approach of
//! oscilloscope displays and of plotting libraries' "min-max" downsampling — so every extreme
//! survives.

use std::collections::VecDeque;

/// One point of a series: seconds since the Unix epoch (UTC), value.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PlotPoint {
    pub t: f64,
    pub v: f64,
}

/// The newest `capacity` points of one metric.
#[derive(Debug, Clone)]
pub struct Ring {
    capacity: usize,
    points: VecDeque<PlotPoint>,
}

impl Ring {
    /// `capacity` is at least 1.
    pub fn new(capacity: usize) -> Ring {
        let capacity = capacity.max(1);
        Ring {
            capacity,
            points: VecDeque::with_capacity(capacity),
        }
    }

    pub fn push(&mut self, t: f64, v: f64) {
        if self.points.len() == self.capacity {
            self.points.pop_front();
        }
        self.points.push_back(PlotPoint { t, v });
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    pub fn last(&self) -> Option<PlotPoint> {
        self.points.back().copied()
    }

    /// All points, oldest first.
    pub fn points(&self) -> Vec<PlotPoint> {
        self.points.iter().copied().collect()
    }

    /// At most `width` points (at least 2 when there are 2), keeping each slice's min and max.
    pub fn decimate(&self, width: usize) -> Vec<PlotPoint> {
        let (a, b) = self.points.as_slices();
        if b.is_empty() {
            decimate_min_max(a, width)
        } else {
            // The ring has wrapped: copy once into time order.
            let flat: Vec<PlotPoint> = self.points.iter().copied().collect();
            decimate_min_max(&flat, width)
        }
    }
}

/// Min/max decimation of `points` (in time order) to at most `width` points.
pub fn decimate_min_max(points: &[PlotPoint], width: usize) -> Vec<PlotPoint> {
    let width = width.max(2);
    if points.len() <= width {
        return points.to_vec();
    }
    let buckets = width / 2;
    let mut out = Vec::with_capacity(buckets * 2);
    for b in 0..buckets {
        // Slice b covers [b·n/buckets, (b+1)·n/buckets): equal counts, every point once.
        let lo = b * points.len() / buckets;
        let hi = (b + 1) * points.len() / buckets;
        let slice = &points[lo..hi];
        let (mut imin, mut imax) = (0, 0);
        for (i, p) in slice.iter().enumerate() {
            if p.v < slice[imin].v {
                imin = i;
            }
            if p.v > slice[imax].v {
                imax = i;
            }
        }
        let (first, second) = if imin <= imax {
            (imin, imax)
        } else {
            (imax, imin)
        };
        out.push(slice[first]);
        if second != first {
            out.push(slice[second]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_newest() {
        let mut r = Ring::new(3);
        for i in 0..5 {
            r.push(f64::from(i), f64::from(i) * 10.0);
        }
        assert_eq!(
            r.points().iter().map(|p| p.v).collect::<Vec<_>>(),
            vec![20.0, 30.0, 40.0]
        );
        assert_eq!(r.last().unwrap().t, 4.0);
    }

    #[test]
    fn decimation_keeps_spikes_and_dips_in_time_order() {
        let mut r = Ring::new(1000);
        for i in 0..1000 {
            let v = match i {
                137 => 100.0,
                612 => -50.0,
                _ => 50.0,
            };
            r.push(f64::from(i), v);
        }
        let d = r.decimate(20);
        assert!(d.len() <= 20);
        assert!(d.iter().any(|p| p.v == 100.0 && p.t == 137.0));
        assert!(d.iter().any(|p| p.v == -50.0 && p.t == 612.0));
        assert!(d.windows(2).all(|w| w[0].t < w[1].t));
    }

    #[test]
    fn short_series_are_returned_whole() {
        let mut r = Ring::new(10);
        r.push(0.0, 1.0);
        r.push(1.0, 2.0);
        assert_eq!(r.decimate(100).len(), 2);
        assert_eq!(decimate_min_max(&[], 10), Vec::new());
    }

    #[test]
    fn wrapped_ring_decimates_like_a_flat_one() {
        let mut r = Ring::new(50);
        for i in 0..173 {
            r.push(f64::from(i), f64::from((i * 37) % 11));
        }
        let flat = r.points();
        assert_eq!(r.decimate(10), decimate_min_max(&flat, 10));
    }
}
