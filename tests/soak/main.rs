//! The soak: a seeded random schedule of ordinary changes through the real API server, with
//! faults injected in the middle of it, against real parts: the control plane, BIND seeded with
//! records gateway-dns does not own, and three `serve` replicas on one Lease (each reaching the
//! API server through a proxy of its own). An independent checker samples the zone by AXFR all
//! along and checks, at each quiet point, the promises gateway-dns makes (`checker.rs` lists
//! them). The seed is printed; `GATEWAY_DNS_SOAK_SEED` replays it, and `GATEWAY_DNS_SOAK_OPS`,
//! `GATEWAY_DNS_SOAK_FAULTS` and `GATEWAY_DNS_SOAK_SECONDS` bound the run. docs/reliability.md
//! has a long run's figures.

#[path = "../support/mod.rs"]
mod support;

mod checker;
mod schedule;
mod world;

use std::time::{Duration, Instant};

use schedule::{Rng, Schedule};
use world::World;

/// How the run is bounded, from the environment.
#[derive(Debug, Clone)]
pub struct Settings {
    pub seed: u64,
    pub ops: usize,
    pub faults: usize,
    /// No new operation starts past this; the last quiet point and its checks follow.
    pub seconds: u64,
}

impl Settings {
    fn from_env() -> Settings {
        let number = |name: &str, default: u64| -> u64 {
            match std::env::var(name) {
                Ok(text) => text
                    .trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}={text:?} is not a whole number")),
                Err(_) => default,
            }
        };
        let seed = number(
            "GATEWAY_DNS_SOAK_SEED",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1),
        );
        let ops = number("GATEWAY_DNS_SOAK_OPS", 600) as usize;
        Settings {
            seed,
            ops,
            faults: number("GATEWAY_DNS_SOAK_FAULTS", (ops / 20) as u64) as usize,
            seconds: number("GATEWAY_DNS_SOAK_SECONDS", 300),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_schedule_of_changes_and_faults_keeps_every_promise() {
    let settings = Settings::from_env();
    eprintln!(
        "soak: seed {} (replay with GATEWAY_DNS_SOAK_SEED={}), {} operations, {} faults, at most {} s",
        settings.seed, settings.seed, settings.ops, settings.faults, settings.seconds
    );
    let started = Instant::now();
    let mut world = World::start().await;
    let mut schedule = Schedule::new(Rng::new(settings.seed), &settings);
    let report = schedule
        .run(&mut world, started + Duration::from_secs(settings.seconds))
        .await;
    let checked = world.finish(&report).await;
    eprintln!("{}", report.render(&checked, started.elapsed()));
    assert!(
        checked.violations.is_empty(),
        "seed {}: {} violation(s):\n{}",
        settings.seed,
        checked.violations.len(),
        checked.violations.join("\n")
    );
    assert!(
        report.ops_done() > 0 && report.faults_done() > 0,
        "seed {}: the run did nothing",
        settings.seed
    );
}
