//! A latency histogram with log-scaled buckets (the HDR histogram idea, cut down): 128 buckets
//! per power of two, so any recorded value is reported within 1 % of itself, in a fixed 30 KiB
//! whatever the number of samples. Recording is an index computation and an increment, cheap
//! enough for every request of a load run.

/// Sub-buckets per power of two, as a power of two: 2^7 = 128, a relative error below 0.8 %.
const SUB_BITS: u32 = 7;
/// The largest exponent kept; larger values (over 2^36 µs, about 19 hours) are clamped.
const MAX_EXP: u32 = 35;
const BUCKETS: usize = (((MAX_EXP - SUB_BITS) << SUB_BITS) + (2 << SUB_BITS)) as usize;

/// Counts of values (microseconds) in log-scaled buckets, plus the exact max, sum and count.
#[derive(Clone, Debug)]
pub struct Histogram {
    /// Samples per bucket; see [`index`].
    counts: Vec<u64>,
    /// Samples recorded.
    count: u64,
    /// Sum of the samples, for the mean.
    sum: u128,
    /// The largest sample, exact (the buckets only know its neighbourhood).
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum: 0,
            max: 0,
        }
    }
}

/// The bucket of `v`: `v` itself below 2^(SUB_BITS+1), else the exponent and the next
/// SUB_BITS bits of the mantissa.
fn index(v: u64) -> usize {
    let v = v.min((1 << (MAX_EXP + 1)) - 1);
    if v < (2 << SUB_BITS) {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros();
    let shift = exp - SUB_BITS;
    (((shift as u64) << SUB_BITS) + (v >> shift)) as usize
}

/// The largest value that falls in bucket `i`.
fn highest(i: usize) -> u64 {
    let i = i as u64;
    if i < (2 << SUB_BITS) {
        return i;
    }
    let shift = (i >> SUB_BITS) - 1;
    let mantissa = i - (shift << SUB_BITS);
    ((mantissa + 1) << shift) - 1
}

impl Histogram {
    /// Records one value.
    pub fn record(&mut self, micros: u64) {
        self.counts[index(micros)] += 1;
        self.count += 1;
        self.sum += micros as u128;
        self.max = self.max.max(micros);
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The largest sample; `None` when empty.
    pub fn max(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max)
    }

    /// The mean; `None` when empty.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// The nearest-rank quantile `q` (0 < q ≤ 1): the smallest value such that at least
    /// `q × count` samples are at or below it, reported as its bucket's highest value (never
    /// above the max). `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        if rank == self.count {
            return Some(self.max);
        }
        let mut seen = 0;
        for (i, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(highest(i).min(self.max));
            }
        }
        Some(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut prev = None;
        for v in (0..5_000_000u64).step_by(7).chain([u64::MAX / 2]) {
            let i = index(v);
            assert!(i < BUCKETS, "{v} → {i}");
            let v = v.min((1 << (MAX_EXP + 1)) - 1);
            assert!(highest(i) >= v, "{v}");
            if let Some(p) = prev {
                assert!(i >= p, "monotonic at {v}");
            }
            prev = Some(i);
            // Within 1 % of the value.
            assert!(highest(i) - v <= v / 100 + 1, "{v} → {}", highest(i));
        }
        for i in 1..BUCKETS {
            assert_eq!(
                index(highest(i - 1) + 1),
                i,
                "bucket {i} starts after {}",
                i - 1
            );
        }
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::default();
        for v in [3, 1, 2, 4, 200] {
            h.record(v);
        }
        assert_eq!(h.quantile(0.2), Some(1));
        assert_eq!(h.quantile(0.5), Some(3));
        assert_eq!(h.quantile(0.8), Some(4));
        assert_eq!(h.quantile(1.0), Some(200));
        assert_eq!(h.max(), Some(200));
        assert_eq!(h.mean(), Some(42.0));
    }

    #[test]
    fn percentiles_of_a_uniform_spread_are_within_one_percent() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        for (q, exact) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.999, 99_900.0)] {
            let got = h.quantile(q).unwrap() as f64;
            assert!((got - exact).abs() / exact < 0.01, "q{q}: {got} vs {exact}");
            assert!(got >= exact, "reports the bucket's top, never under");
        }
        assert_eq!(h.quantile(1.0), Some(100_000));
        assert_eq!(h.count(), 100_000);
    }

    #[test]
    fn merge_adds_and_empty_has_none() {
        let mut a = Histogram::default();
        assert_eq!(a.quantile(0.5), None);
        assert_eq!(a.max(), None);
        let mut b = Histogram::default();
        a.record(10);
        b.record(1_000_000);
        b.record(20);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.quantile(0.5), Some(20));
        assert_eq!(a.max(), Some(1_000_000));
        // Out of range values are clamped into the last bucket, the max stays exact.
        a.record(u64::MAX);
        assert_eq!(a.max(), Some(u64::MAX));
        assert_eq!(a.quantile(1.0), Some(u64::MAX));
    }
}
