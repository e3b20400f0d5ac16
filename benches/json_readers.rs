//! The webhook's JSON readers side by side, on the route objects of the admission fixtures
//! (`tests/fixtures/admission/reviews/*.json`) and a larger generated route: the hand-written
//! one-walk scanner the webhook uses first (`model::scan::route`), serde_json (its fallback),
//! and the fast JSON libraries sonic-rs and simd-json, each reading into the same projection
//! (`model::Projection`, through serde) and checked to give the same object. Per reader, the
//! median of 7 alternating rounds: ns per object and the ratio to the scanner.
//!
//! Run: `cargo bench --bench json_readers`. simd-json parses in place: its time includes the
//! copy of the text it needs (the webhook's body is shared, not writable).

use std::hint::black_box;
use std::time::{Duration, Instant};

use gateway_dns::model::scan::{self, Cursor};
use gateway_dns::model::{DecodeError, Object, Projection};

const ROUNDS: usize = 7;
const PASSES: usize = 2_000;

type Read = Result<Option<Object>, DecodeError>;
/// A reader by name.
type Reader = (&'static str, fn(&str) -> Read);

fn scanner(text: &str) -> Read {
    scan::route(&mut Cursor::new(text)).expect("the scanner reads these routes")
}

fn serde_json_reader(text: &str) -> Read {
    serde_json::from_str::<Projection>(text)
        .expect("serde_json reads these routes")
        .0
}

fn sonic_reader(text: &str) -> Read {
    sonic_rs::from_str::<Projection>(text)
        .expect("sonic-rs reads these routes")
        .0
}

fn simd_reader(text: &str) -> Read {
    let mut bytes = text.as_bytes().to_vec();
    simd_json::serde::from_slice::<Projection>(&mut bytes)
        .expect("simd-json reads these routes")
        .0
}

/// The route objects of the fixtures' reviews, and one with 100 hostnames and 8 rules.
fn objects() -> Vec<String> {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/admission/reviews"
    );
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("fixtures")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let mut objects: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let review: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
            let object = &review["request"]["object"];
            (object["kind"] == "HTTPRoute").then(|| object.to_string())
        })
        .collect();
    let hostnames: Vec<String> = (0..100).map(|i| format!("h{i}.apps.example.com")).collect();
    let rules: Vec<serde_json::Value> = (0..8)
        .map(|i| {
            serde_json::json!({
                "matches": [{"path": {"type": "PathPrefix", "value": format!("/p{i}")}}],
                "backendRefs": [{"name": format!("svc{i}"), "port": 8080}]
            })
        })
        .collect();
    objects.push(
        serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "big", "namespace": "apps", "uid": "0f0e",
                "resourceVersion": "12345", "generation": 3,
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": "big", "team": "apps"},
                "annotations": {"note": "a route with many names"}},
            "spec": {"parentRefs": [{"name": "gw", "namespace": "infra", "sectionName": "https"}],
                "hostnames": hostnames, "rules": rules},
            "status": {"parents": [{"parentRef": {"name": "gw", "namespace": "infra"},
                "controllerName": "example.com/gateway",
                "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
                    "observedGeneration": 3}]}]}
        })
        .to_string(),
    );
    objects
}

/// Time per object of one pass of `read` over `objects`, `PASSES` times.
fn time(read: fn(&str) -> Read, objects: &[String]) -> Duration {
    let started = Instant::now();
    for _ in 0..PASSES {
        for object in objects {
            let _ = black_box(read(black_box(object)));
        }
    }
    started.elapsed() / (PASSES * objects.len()) as u32
}

fn main() {
    let all = objects();
    let total = all.len();
    // The scanner declines what it is unsure of (the serde reader answers then): measured on
    // what it reads, which is nearly every review the webhook gets.
    let objects: Vec<String> = all
        .into_iter()
        .filter(|o| scan::route(&mut Cursor::new(o)).is_some())
        .collect();
    assert!(
        objects.iter().any(|o| o.len() > 4_000),
        "the large route is read by the scanner"
    );
    println!(
        "{} of {total} route objects read by the scanner",
        objects.len()
    );
    let bytes: usize = objects.iter().map(String::len).sum();
    let readers: [Reader; 4] = [
        ("scanner (model::scan)", scanner),
        ("serde_json", serde_json_reader),
        ("sonic-rs", sonic_reader),
        ("simd-json", simd_reader),
    ];
    // Every reader gives the scanner's object: the comparison is of equal work.
    for object in &objects {
        let expected = format!("{:?}", scanner(object));
        for (name, read) in &readers[1..] {
            assert_eq!(format!("{:?}", read(object)), expected, "{name} differs");
        }
    }
    println!(
        "{} route objects, {} bytes on average; {ROUNDS} rounds of {PASSES} passes, readers alternating",
        objects.len(),
        bytes / objects.len()
    );
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); readers.len()];
    for _ in 0..ROUNDS {
        for (i, (_, read)) in readers.iter().enumerate() {
            samples[i].push(time(*read, &objects));
        }
    }
    let medians: Vec<Duration> = samples
        .iter_mut()
        .map(|s| {
            s.sort_unstable();
            s[s.len() / 2]
        })
        .collect();
    for ((name, _), median) in readers.iter().zip(&medians) {
        println!(
            "{name:<22} {:>8.0} ns per object  {:.2}x the scanner's time",
            median.as_nanos() as f64,
            median.as_secs_f64() / medians[0].as_secs_f64()
        );
    }
}
