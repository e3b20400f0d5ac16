//! Rate limits and series for Events, pure (the caller passes the time).
//!
//! A flapping cluster must not flood etcd: every Event write (a new Event or a series update)
//! takes a token from its object's bucket and from a global one, as client-go's event spam
//! filter does per object. Repeats of one Event (same object, type, reason and note) within
//! [`SERIES_WINDOW`] update the existing Event's `series` (count and lastObservedTime) instead
//! of creating another, as client-go's events.k8s.io recorder does.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// A token bucket: up to `burst` at once, one more every `refill`.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    burst: f64,
    tokens: f64,
    per_second: f64,
    last: Instant,
}

impl TokenBucket {
    pub fn new(burst: u32, refill: Duration, now: Instant) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            burst,
            tokens: burst,
            per_second: 1.0 / refill.as_secs_f64().max(1e-9),
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.burst);
        self.last = now;
    }

    fn available(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= 1.0
    }

    fn take(&mut self) {
        self.tokens -= 1.0;
    }

    /// Full again: forgetting the bucket changes nothing.
    fn is_full(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= self.burst
    }
}

/// The Event rate limits (documented in docs/troubleshooting.md, "Events and PolicyReports").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Event writes one object may get at once (client-go's spam filter: 25)...
    pub per_object_burst: u32,
    /// ...and then one every this long (client-go's: 5 minutes).
    pub per_object_refill: Duration,
    /// Event writes of the whole process at once...
    pub global_burst: u32,
    /// ...and then one every this long.
    pub global_refill: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            per_object_burst: 25,
            per_object_refill: Duration::from_secs(300),
            global_burst: 100,
            global_refill: Duration::from_millis(200),
        }
    }
}

/// Object buckets kept before full ones are forgotten.
const KEPT_BUCKETS: usize = 1024;

/// A bucket per object and one for everything.
#[derive(Debug)]
pub struct RateLimiter<K> {
    limits: Limits,
    global: TokenBucket,
    objects: HashMap<K, TokenBucket>,
}

impl<K: Eq + Hash + Clone> RateLimiter<K> {
    pub fn new(limits: Limits, now: Instant) -> RateLimiter<K> {
        RateLimiter {
            limits,
            global: TokenBucket::new(limits.global_burst, limits.global_refill, now),
            objects: HashMap::new(),
        }
    }

    /// Takes a token for `object` when both its bucket and the global one have one; otherwise
    /// takes nothing and says no.
    pub fn allow(&mut self, object: &K, now: Instant) -> bool {
        if self.objects.len() >= KEPT_BUCKETS {
            self.objects.retain(|_, bucket| !bucket.is_full(now));
        }
        let limits = self.limits;
        let bucket = self.objects.entry(object.clone()).or_insert_with(|| {
            TokenBucket::new(limits.per_object_burst, limits.per_object_refill, now)
        });
        if !bucket.available(now) || !self.global.available(now) {
            return false;
        }
        bucket.take();
        self.global.take();
        true
    }
}

/// How long an Event stays the one that repeats update (client-go's 6 minutes); after that a
/// repeat makes a new Event.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// An Event written earlier that a repeat updates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The Event object's name (in the regarding object's namespace).
    pub name: String,
    /// Occurrences so far (1 for an Event without series).
    pub count: i32,
    last_observed: Instant,
}

/// What to do for one occurrence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Occurrence {
    /// Create a new Event.
    New,
    /// Update Event `name`'s series to `count`.
    Repeat { name: String, count: i32 },
}

/// The Events written within the series window, by key.
#[derive(Debug)]
pub struct SeriesCache<K> {
    window: Duration,
    written: HashMap<K, Written>,
}

impl<K: Eq + Hash + Clone> SeriesCache<K> {
    pub fn new(window: Duration) -> SeriesCache<K> {
        SeriesCache {
            window,
            written: HashMap::new(),
        }
    }

    /// Whether this occurrence of `key` is new or repeats an Event still in its window.
    pub fn occurrence(&mut self, key: &K, now: Instant) -> Occurrence {
        let window = self.window;
        self.written
            .retain(|_, w| now.saturating_duration_since(w.last_observed) < window);
        match self.written.get(key) {
            Some(written) => Occurrence::Repeat {
                name: written.name.clone(),
                count: written.count.saturating_add(1),
            },
            None => Occurrence::New,
        }
    }

    /// Records a write that succeeded: a new Event (`count` 1) or a series update.
    pub fn written(&mut self, key: K, name: String, count: i32, now: Instant) {
        self.written.insert(
            key,
            Written {
                name,
                count,
                last_observed: now,
            },
        );
    }

    /// Forgets an Event that is gone (expired by the API server's event TTL, or deleted).
    pub fn forget(&mut self, key: &K) {
        self.written.remove(key);
    }

    pub fn len(&self) -> usize {
        self.written.len()
    }

    pub fn is_empty(&self) -> bool {
        self.written.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_one_per_refill() {
        let start = Instant::now();
        let limits = Limits {
            per_object_burst: 3,
            per_object_refill: Duration::from_secs(10),
            global_burst: 100,
            global_refill: Duration::from_millis(1),
        };
        let mut limiter = RateLimiter::new(limits, start);
        let allowed = (0..10).filter(|_| limiter.allow(&"a", start)).count();
        assert_eq!(allowed, 3, "the burst");
        assert!(!limiter.allow(&"a", start + Duration::from_secs(9)));
        assert!(
            limiter.allow(&"a", start + Duration::from_secs(10)),
            "one token refilled"
        );
        assert!(!limiter.allow(&"a", start + Duration::from_secs(10)));
        // Another object has its own bucket.
        assert!(limiter.allow(&"b", start));
        // A long pause refills only up to the burst.
        let later = start + Duration::from_secs(3600);
        assert_eq!((0..10).filter(|_| limiter.allow(&"a", later)).count(), 3);
    }

    #[test]
    fn the_global_bucket_bounds_every_object_together() {
        let start = Instant::now();
        let limits = Limits {
            per_object_burst: 25,
            per_object_refill: Duration::from_secs(300),
            global_burst: 5,
            global_refill: Duration::from_secs(1),
        };
        let mut limiter = RateLimiter::new(limits, start);
        let allowed = (0..50)
            .filter(|i| limiter.allow(&format!("route-{i}"), start))
            .count();
        assert_eq!(allowed, 5);
        // A refused write takes no token from its object: it can still go when the global
        // bucket refills.
        let later = start + Duration::from_secs(1);
        assert!(limiter.allow(&"route-49".to_string(), later));
        assert!(!limiter.allow(&"route-48".to_string(), later));
    }

    #[test]
    fn full_buckets_are_forgotten_when_many_objects_were_seen() {
        let start = Instant::now();
        let mut limiter = RateLimiter::new(Limits::default(), start);
        for i in 0..KEPT_BUCKETS {
            limiter
                .objects
                .insert(i, TokenBucket::new(25, Duration::from_secs(300), start));
        }
        assert!(limiter.allow(&usize::MAX, start));
        assert_eq!(
            limiter.objects.len(),
            1,
            "only the bucket just used is kept"
        );
    }

    #[test]
    fn repeats_within_the_window_are_a_series() {
        let start = Instant::now();
        let mut cache = SeriesCache::new(SERIES_WINDOW);
        assert_eq!(cache.occurrence(&"k", start), Occurrence::New);
        cache.written("k", "web.1".to_string(), 1, start);
        let minute = start + Duration::from_secs(60);
        assert_eq!(
            cache.occurrence(&"k", minute),
            Occurrence::Repeat {
                name: "web.1".to_string(),
                count: 2
            }
        );
        cache.written("k", "web.1".to_string(), 2, minute);
        // The window counts from the last occurrence.
        let later = minute + SERIES_WINDOW - Duration::from_secs(1);
        assert_eq!(
            cache.occurrence(&"k", later),
            Occurrence::Repeat {
                name: "web.1".to_string(),
                count: 3
            }
        );
        assert_eq!(cache.occurrence(&"other", later), Occurrence::New);
        // After the window: a new Event, and the old entry is gone.
        assert_eq!(
            cache.occurrence(&"k", minute + SERIES_WINDOW),
            Occurrence::New
        );
        assert!(cache.is_empty());
        cache.written("k", "web.2".to_string(), 1, later);
        cache.forget(&"k");
        assert_eq!(cache.occurrence(&"k", later), Occurrence::New);
    }
}
