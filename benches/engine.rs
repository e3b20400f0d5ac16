//! Engine benchmark on synthetic clusters: settling every name (`settle_all`), one-route
//! re-evaluation, index memory, and building the status page's names table over the settled
//! outcome (every row, sorted by targets, its first page; `status::view`), beside the settle it
//! reads.
//!
//! `cargo bench --bench engine` (or `-- 1000 10000` for chosen sizes). Prints figures; it asserts
//! nothing about speed.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway_dns::engine::Config;
use gateway_dns::engine::World;
use gateway_dns::engine::names::evaluate_route;
use gateway_dns::engine::settle::{newcomer_conflicts, settle_all};
use gateway_dns::index::{Index, Snapshot};
use gateway_dns::model::Object;
use gateway_dns::status::view::{self, NameQuery};
use serde_json::json;

#[path = "support/counting.rs"]
mod counting;

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

#[path = "support/synthetic.rs"]
mod synthetic;
use synthetic::{GATEWAYS, cluster, decode, gateway, route_value};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

struct Figures {
    routes: usize,
    build: Duration,
    settle: Duration,
    reeval: Duration,
    index_apply: Duration,
    bytes_per_route: f64,
    /// Rows of the names table, and the time to build them and one page.
    page_rows: usize,
    page: Duration,
}

fn measure(routes: usize) -> Figures {
    let cfg = Arc::new(Config::default());
    let objects = cluster(routes);
    let gateways_only: Vec<Object> = objects[..GATEWAYS].to_vec();

    // Memory: the index with gateways only vs with every route, inputs dropped in both cases.
    let before = counting::live();
    let base = Snapshot::from_objects(cfg.clone(), gateways_only);
    let with_gateways = counting::live();
    drop(base);
    let started = Instant::now();
    let snapshot = Snapshot::from_objects(cfg.clone(), objects);
    let build = started.elapsed();
    let full = counting::live();
    let bytes_per_route = (full - before - (with_gateways - before)) as f64 / routes as f64;

    let settle = median(
        (0..3)
            .map(|_| {
                let started = Instant::now();
                black_box(settle_all(&snapshot));
                started.elapsed()
            })
            .collect(),
    );

    // The status page's names table: every row, sorted by targets, and its first page, with no
    // time budget (the page's own cuts a build short at 500 ms).
    let outcome = settle_all(&snapshot);
    let zones = vec!["example.com".to_owned(), "example.org".to_owned()];
    // No filter: every row is made, then sorted by another column than the name.
    let query = NameQuery {
        sort: "targets".to_owned(),
        ..NameQuery::default()
    };
    let mut page_rows = 0;
    let page = median(
        (0..3)
            .map(|_| {
                let started = Instant::now();
                let far = started + Duration::from_secs(3600);
                let (rows, total, partial) =
                    view::rows(&snapshot, &outcome, &zones, "bench", &query, far);
                page_rows = total;
                black_box(view::names_page(rows, total, partial, &query));
                started.elapsed()
            })
            .collect(),
    );
    drop(outcome);

    // One route changes: as-if-applied on the snapshot + its conflicts (the webhook's path).
    let iterations = 2000;
    let changed: Vec<Object> = (0..iterations)
        .map(|k| {
            let i = (k * 7919) % routes;
            let mut value = route_value(i, routes, "");
            value["spec"]["hostnames"][1] = json!(format!("changed{k}.example.org"));
            decode(value)
        })
        .collect();
    let started = Instant::now();
    for object in &changed {
        let Object::Route(route) = object else {
            unreachable!("routes only")
        };
        let eval = evaluate_route(&snapshot, snapshot.config(), route);
        black_box(newcomer_conflicts(&snapshot, route, &eval));
    }
    let reeval = started.elapsed() / iterations as u32;

    // The live index: apply one changed route and publish a new snapshot.
    let index = Index::with_config(cfg);
    index.replace_all(
        snapshot
            .routes()
            .map(|(_, e)| Object::Route(e.route.clone()))
            .collect(),
    );
    for g in 0..GATEWAYS {
        index.apply(gateway(g));
    }
    let started = Instant::now();
    for object in &changed {
        index.apply(object.clone());
    }
    let index_apply = started.elapsed() / iterations as u32;

    Figures {
        routes,
        build,
        settle,
        reeval,
        index_apply,
        bytes_per_route,
        page_rows,
        page,
    }
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect::<Vec<_>>();
    let sizes = if sizes.is_empty() {
        vec![1_000, 10_000, 100_000]
    } else {
        sizes
    };
    println!(
        "engine benchmark: {GATEWAYS} Gateways (10% wildcard listeners), 2 hostnames/route, 1% conflicting names"
    );
    println!(
        "{:>8}  {:>12}  {:>12}  {:>14}  {:>14}  {:>12}  {:>9}  {:>12}  {:>11}",
        "routes",
        "build+eval",
        "settle all",
        "re-eval/route",
        "index apply",
        "index B/route",
        "page rows",
        "status page",
        "page/settle"
    );
    let mut results = Vec::new();
    for routes in sizes {
        let f = measure(routes);
        println!(
            "{:>8}  {:>10.1}ms  {:>10.1}ms  {:>12.1}µs  {:>12.1}µs  {:>12.0}  {:>9}  {:>10.1}ms  {:>10.2}x",
            f.routes,
            f.build.as_secs_f64() * 1e3,
            f.settle.as_secs_f64() * 1e3,
            f.reeval.as_secs_f64() * 1e6,
            f.index_apply.as_secs_f64() * 1e6,
            f.bytes_per_route,
            f.page_rows,
            f.page.as_secs_f64() * 1e3,
            f.page.as_secs_f64() / f.settle.as_secs_f64()
        );
        results.push(f);
    }
    if let (Some(first), Some(last)) = (results.first(), results.last())
        && results.len() > 1
    {
        println!(
            "ratio {}→{} routes: re-eval {:.2}x (flat = 1), settle all per route {:.2}x, memory per route {:.2}x",
            first.routes,
            last.routes,
            last.reeval.as_secs_f64() / first.reeval.as_secs_f64(),
            (last.settle.as_secs_f64() / last.routes as f64)
                / (first.settle.as_secs_f64() / first.routes as f64),
            last.bytes_per_route / first.bytes_per_route
        );
    }
}
