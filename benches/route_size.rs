//! One route of growing size: evaluation time and peak heap against hostnames × parents, and the
//! growth ratio between successive doublings (linear growth shows as a ratio near 2). The claims
//! column is the route's output (one claim per name and Gateway it resolves through), the size
//! any evaluation has to produce.
//!
//! `cargo bench --bench route_size`. Two series on Gateways of 64 listeners each, with the
//! size caps lifted: hostnames 1,250 → 20,000 on 4 Gateways, then parentRefs 4 → 64 with 2,000
//! hostnames. Each point is the webhook's work for a CREATE of the route (`route_findings`:
//! evaluation plus conflicts against the index) and applying it to the live index (start-up's
//! work), the best of a few runs. Prints figures; asserts nothing about speed.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway_dns::engine::Config;
use gateway_dns::engine::admission::route_findings;
use gateway_dns::index::Index;

#[allow(dead_code)]
#[path = "../tests/support/big_route.rs"]
mod big_route;

#[path = "support/counting.rs"]
mod counting;

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

const LISTENERS: usize = 64;
const RUNS: usize = 3;

/// Runs `work` and returns its time and the heap it held at its peak above where it started.
fn measure<R>(work: impl FnOnce() -> R) -> (Duration, usize) {
    let before = counting::reset_peak();
    let started = Instant::now();
    let result = work();
    let elapsed = started.elapsed();
    let peak = counting::peak() - before;
    drop(black_box(result));
    (elapsed, usize::try_from(peak).unwrap_or(0))
}

struct Point {
    hostnames: usize,
    gateways: usize,
    review: Duration,
    review_peak: usize,
    apply: Duration,
    apply_peak: usize,
    claims: usize,
}

fn point(hostnames: usize, gateways: usize) -> Point {
    let cfg = Config {
        max_route_hostnames: usize::MAX,
        max_route_parent_refs: usize::MAX,
        ..Config::default()
    };
    let route = big_route::decode(big_route::route_json(hostnames, gateways, LISTENERS));
    let gateway_dns::model::Object::Route(route) = route else {
        unreachable!("route_json is a route")
    };
    let mut best = Point {
        hostnames,
        gateways,
        review: Duration::MAX,
        review_peak: 0,
        apply: Duration::MAX,
        apply_peak: 0,
        claims: 0,
    };
    for _ in 0..RUNS {
        let index = Index::with_config(Arc::new(cfg.clone()));
        index.replace_all(big_route::gateways(gateways, LISTENERS));
        let (review, review_peak) =
            measure(|| index.read(|snapshot| route_findings(snapshot, &route).len()));
        let (apply, apply_peak) =
            measure(|| index.apply(gateway_dns::model::Object::Route(route.clone())));
        best.claims = index.read(|snapshot| {
            use gateway_dns::engine::World as _;
            snapshot
                .routes()
                .map(|(_, entry)| entry.eval.claims.len())
                .sum()
        });
        if review < best.review {
            (best.review, best.review_peak) = (review, review_peak);
        }
        if apply < best.apply {
            (best.apply, best.apply_peak) = (apply, apply_peak);
        }
    }
    best
}

fn print_series(title: &str, points: &[Point]) {
    println!("\n{title}");
    println!(
        "{:>9} {:>8} {:>12} {:>11} {:>11} {:>11} {:>11} {:>8} {:>8}",
        "hostnames",
        "parents",
        "claims",
        "review ms",
        "review MiB",
        "apply ms",
        "apply MiB",
        "×review",
        "×apply"
    );
    let mib = |bytes: usize| bytes as f64 / (1024.0 * 1024.0);
    let mut previous: Option<&Point> = None;
    for point in points {
        let ratio = |now: Duration, before: Option<Duration>| {
            before.map_or("-".to_owned(), |before| {
                format!("{:.2}", now.as_secs_f64() / before.as_secs_f64())
            })
        };
        println!(
            "{:>9} {:>8} {:>12} {:>11.1} {:>11.1} {:>11.1} {:>11.1} {:>8} {:>8}",
            point.hostnames,
            point.gateways,
            point.claims,
            point.review.as_secs_f64() * 1e3,
            mib(point.review_peak),
            point.apply.as_secs_f64() * 1e3,
            mib(point.apply_peak),
            ratio(point.review, previous.map(|p| p.review)),
            ratio(point.apply, previous.map(|p| p.apply)),
        );
        previous = Some(point);
    }
    if let (Some(first), Some(last)) = (points.first(), points.last()) {
        // The work a route implies: its claims (one per name and Gateway) plus its listeners.
        let size = |p: &Point| (p.claims + p.gateways * LISTENERS) as f64;
        println!(
            "claims + listeners ×{:.1}: review time ×{:.1}, apply time ×{:.1}, review peak heap ×{:.1}",
            size(last) / size(first),
            last.review.as_secs_f64() / first.review.as_secs_f64(),
            last.apply.as_secs_f64() / first.apply.as_secs_f64(),
            last.review_peak as f64 / first.review_peak.max(1) as f64,
        );
    }
}

fn main() {
    let by_hostnames: Vec<Point> = [1_250, 2_500, 5_000, 10_000, 20_000]
        .into_iter()
        .map(|hostnames| point(hostnames, 4))
        .collect();
    print_series(
        "hostnames doubling (4 Gateways × 64 listeners)",
        &by_hostnames,
    );
    let by_parents: Vec<Point> = [4, 8, 16, 32, 64]
        .into_iter()
        .map(|gateways| point(2_000, gateways))
        .collect();
    print_series(
        "parentRefs doubling (2,000 hostnames, 64 listeners each)",
        &by_parents,
    );
}
