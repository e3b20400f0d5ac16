//! Exponential backoff with "equal jitter", for every retry loop: each delay is drawn from
//! [d/2, d] where d doubles from `min` up to `max` with each failure. The fixed half keeps a
//! retry from coming too soon; the random half keeps replicas that failed together from
//! retrying together.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            min,
            max: max.max(min),
            failures: 0,
        }
    }

    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// Failures since the last reset.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    pub fn next_delay(&mut self) -> Duration {
        let factor = 2u32.saturating_pow(self.failures.min(20));
        self.failures = self.failures.saturating_add(1);
        let ceiling = self.min.saturating_mul(factor).min(self.max);
        let half = ceiling / 2;
        half + half.mul_f64(fastrand::f64())
    }
}

/// The delays one after another, without end.
impl Iterator for Backoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(self.next_delay())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let delays: Vec<Duration> = (0..8).map(|_| backoff.next_delay()).collect();
        assert!(delays[0] >= Duration::from_millis(50) && delays[0] <= Duration::from_millis(100));
        assert!(delays[3] >= Duration::from_millis(400) && delays[3] <= Duration::from_millis(800));
        for delay in &delays[4..] {
            assert!(*delay >= Duration::from_millis(500) && *delay <= Duration::from_secs(1));
        }
        assert_eq!(backoff.failures(), 8);
        backoff.reset();
        assert!(backoff.next_delay() <= Duration::from_millis(100));
    }
}
