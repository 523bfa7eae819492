//! The load generator's random source: small, fast and seedable, so generated data is
//! reproducible without a `rand` dependency.

/// A small, fast, seedable generator (SplitMix64): reproducible data without a `rand` dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }

    /// A price-like amount in `lo..hi` with two decimals.
    pub fn money(&mut self, lo: u64, hi: u64) -> f64 {
        (lo * 100 + self.below((hi - lo) * 100)) as f64 / 100.0
    }

    pub fn hex(&mut self, digits: usize) -> String {
        let s = format!("{:016x}{:016x}", self.next_u64(), self.next_u64());
        s[..digits].to_string()
    }
}
