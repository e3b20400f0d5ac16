//! Load benchmark of the admission webhook: keep-alive HTTPS from 64 concurrent connections
//! against the real server, on the baseline route (a fixed "allowed" answer, no decoding) and
//! on `/validate` with the handler under test, in the same process, alternating in rounds.
//!
//! Prints req/s, p50 and p99 for both, each round's ratio and the overall ratio, the
//! handler's own time, and the cost and allocations per request in process.
//!
//! Run: `cargo bench --bench admission_load`
//! Knobs (environment): `GATEWAY_DNS_BENCH_SECONDS` (per route and round, default 0.5),
//! `GATEWAY_DNS_BENCH_ROUNDS` (baseline and /validate alternate, default 20),
//! `GATEWAY_DNS_BENCH_CONNECTIONS` (default 64), `GATEWAY_DNS_BENCH_ROUTES` (index size, default
//! 20k), `GATEWAY_DNS_BENCH_HTTP2=1` (h2 instead of
//! HTTP/1.1 on each connection), `GATEWAY_DNS_BENCH_ONLY=baseline` or `=validate` (drive that
//! route alone, for a profiler to see one side; no ratio), `GATEWAY_DNS_BENCH_PIN=0` (no CPU
//! pinning).
//!
//! With two CPUs or more, the server's runtime (one worker) and the load client's are each
//! pinned to a CPU of their own (`sched_setaffinity`; the output says which), so that the ratio
//! is the server's own cost, not a share of cores the client also needs.
//!
//! The workload is the real decision: the engine-backed handler over an index of 20k HTTPRoutes
//! on 200 Gateways, sent a mix of reviews that are allowed, denied (a hostname another Gateway
//! serves) and allowed with a warning (a hostname outside the listener).

#[path = "../tests/support/webhook.rs"]
#[allow(dead_code)]
mod webhook_support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gateway_dns::webhook::review::{AdmissionAnswer, AdmissionHandler, AdmissionRequest};
use gateway_dns::webhook::state::WebhookOptions;
use hyper::http::{Method, StatusCode};
use serde_json::Value;

use webhook_support::{HttpsConnection, TestWebhook, client_tls_config};

#[path = "support/synthetic.rs"]
#[allow(dead_code)]
mod synthetic;

/// The allocator of the `gateway-dns` binary (src/main.rs), so the server measured here
/// allocates as the shipped one does; it also counts each thread's allocations, which the
/// in-process figures report per request.
#[global_allocator]
static ALLOCATOR: CountingMimalloc = CountingMimalloc;

struct CountingMimalloc;

thread_local! {
    /// Allocations (and reallocations) made by this thread: a plain cell, no shared counter
    /// for the load rounds' threads to contend on.
    static ALLOCATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn count_allocation() {
    // `try_with`: a thread being torn down has no counter left, and allocates uncounted.
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
}

/// This thread's allocations so far.
fn allocations() -> u64 {
    ALLOCATIONS.try_with(std::cell::Cell::get).unwrap_or(0)
}

unsafe impl std::alloc::GlobalAlloc for CountingMimalloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        count_allocation();
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        count_allocation();
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: std::alloc::Layout) {
        unsafe { mimalloc::MiMalloc.dealloc(pointer, layout) }
    }

    unsafe fn realloc(
        &self,
        pointer: *mut u8,
        layout: std::alloc::Layout,
        new_size: usize,
    ) -> *mut u8 {
        count_allocation();
        unsafe { mimalloc::MiMalloc.realloc(pointer, layout, new_size) }
    }
}

const WARMUP: Duration = Duration::from_millis(300);

/// What to benchmark: the decision plugged into the server and the reviews sent to it.
struct Workload {
    label: String,
    handler: Arc<dyn AdmissionHandler>,
    reviews: Vec<Value>,
}

/// Routes in the index (`GATEWAY_DNS_BENCH_ROUTES`, default 20k).
fn routes() -> usize {
    std::env::var("GATEWAY_DNS_BENCH_ROUTES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20_000)
}

fn admission_review(uid: &str, route: &Value) -> Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "HTTPRoute"},
            "resource": {"group": "gateway.networking.k8s.io", "version": "v1", "resource": "httproutes"},
            "namespace": route["metadata"]["namespace"], "name": route["metadata"]["name"],
            "operation": "CREATE", "userInfo": {"username": "bench"}, "object": route, "dryRun": false
        }
    })
}

/// The real decision over a large index, with allowed, denied and warned reviews in turn.
fn engine_workload() -> Workload {
    let routes = routes();
    let index = gateway_dns::index::Index::new();
    index.replace_all(synthetic::cluster(routes));
    let handler = gateway_dns::webhook::handler::EngineHandler::new(
        index,
        Arc::new(gateway_dns::metrics::Metrics::new()),
    );
    let reviews = (0..256)
        .map(|k| {
            // New routes (names past the cluster's), on the Gateway the generator picks.
            let i = routes + k;
            let mut route = synthetic::route_value(i, routes, "-new");
            match k % 4 {
                // Claims a name an existing route serves on another Gateway: denied.
                0 => {
                    route["spec"]["hostnames"][0] = Value::from(format!(
                        "app{}.example.org",
                        (k * 37) % routes / 10 * 10 + 1
                    ))
                }
                // Adds a name outside a wildcard listener: allowed with a warning.
                1 => {
                    route["spec"]["parentRefs"][0]["name"] = Value::from("gw10");
                    route["spec"]["hostnames"] = serde_json::json!([
                        format!("new{k}.zone10.example.com"),
                        format!("new{k}.elsewhere.net")
                    ]);
                }
                _ => {}
            }
            admission_review(&format!("bench-{k}"), &route)
        })
        .collect();
    Workload {
        label: format!(
            "engine over {routes} HTTPRoutes / {} Gateways (deny/warn/allow/allow mix)",
            synthetic::GATEWAYS
        ),
        handler: Arc::new(handler),
        reviews,
    }
}

struct Settings {
    /// Measured time per route and round.
    duration: Duration,
    /// Baseline and /validate alternate this many times in short phases, so a slower or
    /// faster stretch of a shared machine weighs on both alike; the median round is printed
    /// beside the totals.
    rounds: usize,
    connections: usize,
    http2: bool,
    /// Drive one route alone (`baseline` or `validate`), for profiling.
    only: Option<String>,
}

impl Settings {
    fn from_env() -> Self {
        let number = |name: &str, default: f64| {
            std::env::var(name)
                .ok()
                .and_then(|value| value.parse::<f64>().ok())
                .unwrap_or(default)
        };
        Self {
            duration: Duration::from_secs_f64(number("GATEWAY_DNS_BENCH_SECONDS", 0.5)),
            rounds: (number("GATEWAY_DNS_BENCH_ROUNDS", 20.0) as usize).max(1),
            connections: number("GATEWAY_DNS_BENCH_CONNECTIONS", 64.0) as usize,
            http2: std::env::var("GATEWAY_DNS_BENCH_HTTP2").is_ok_and(|value| value == "1"),
            only: std::env::var("GATEWAY_DNS_BENCH_ONLY").ok(),
        }
    }
}

/// Wraps the handler to measure its own time, apart from transport and envelope. Times one
/// call in [`SAMPLE_EVERY`] per worker thread, so the instrument (clock reads, a lock, a
/// counter) barely weighs on the /validate throughput it sits in: the counter is the thread's
/// own, as a shared one would bounce its cache line between the cores on every request.
struct TimedHandler {
    inner: Arc<dyn AdmissionHandler>,
    samples: Mutex<Vec<Duration>>,
    recording: std::sync::atomic::AtomicBool,
}

const SAMPLE_EVERY: u64 = 16;

thread_local! {
    static CALLS_ON_THIS_THREAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl AdmissionHandler for TimedHandler {
    fn is_quick(&self, request: &AdmissionRequest) -> bool {
        self.inner.is_quick(request)
    }

    fn handle(&self, request: &AdmissionRequest) -> AdmissionAnswer {
        use std::sync::atomic::Ordering::Relaxed;
        let sampled = self.recording.load(Relaxed)
            && CALLS_ON_THIS_THREAD.with(|calls| {
                let call = calls.get();
                calls.set(call.wrapping_add(1));
                call.is_multiple_of(SAMPLE_EVERY)
            });
        if !sampled {
            return self.inner.handle(request);
        }
        let started = Instant::now();
        let answer = self.inner.handle(request);
        let elapsed = started.elapsed();
        if let Ok(mut samples) = self.samples.lock() {
            samples.push(elapsed);
        }
        answer
    }
}

struct Measured {
    requests: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Measured {
    fn merge(&mut self, other: Measured) {
        self.requests += other.requests;
        self.elapsed += other.elapsed;
        self.latencies.extend(other.latencies);
        self.latencies.sort_unstable();
    }

    fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// With a fixed number of connections the mean follows from throughput (Little's law);
    /// p50/p99 also show how fairly the connections are served.
    fn mean(&self) -> Duration {
        let total: Duration = self.latencies.iter().sum();
        total / u32::try_from(self.latencies.len().max(1)).unwrap_or(u32::MAX)
    }
}

fn percentile(sorted: &[Duration], quantile: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * quantile).round() as usize]
}

fn millis(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1e3)
}

/// Drives `path` from `settings.connections` keep-alive connections; each sends the bodies in
/// turn, one request at a time. Requests started during the warm-up are not counted.
async fn drive(
    webhook: &TestWebhook,
    path: &'static str,
    bodies: Arc<Vec<Vec<u8>>>,
    settings: &Settings,
) -> Measured {
    let alpn: &[&[u8]] = if settings.http2 {
        &[b"h2"]
    } else {
        &[b"http/1.1"]
    };
    let config = client_tls_config(
        &[&webhook.ca_pem],
        alpn,
        &[&rustls::version::TLS13, &rustls::version::TLS12],
    );
    let started = Instant::now();
    let measure_from = started + WARMUP;
    let stop_at = measure_from + settings.duration;
    let mut tasks = Vec::new();
    for connection_index in 0..settings.connections {
        let config = config.clone();
        let bodies = bodies.clone();
        let addr = webhook.addr;
        tasks.push(tokio::spawn(async move {
            let mut connection =
                HttpsConnection::connect_with(addr, config, &webhook_support::service_host())
                    .await
                    .expect("connect");
            let mut latencies = Vec::new();
            let mut next = connection_index;
            loop {
                let sent = Instant::now();
                if sent >= stop_at {
                    break;
                }
                let body = bodies[next % bodies.len()].clone();
                next += 1;
                let reply = connection
                    .send(
                        Method::POST,
                        path,
                        &[("content-type", "application/json")],
                        body,
                    )
                    .await
                    .expect("request");
                assert_eq!(reply.status, StatusCode::OK, "{path}");
                if sent >= measure_from {
                    latencies.push(sent.elapsed());
                }
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("load task"));
    }
    latencies.sort_unstable();
    Measured {
        requests: latencies.len(),
        elapsed: settings.duration,
        latencies,
    }
}

/// Pins the calling thread to `cpu` alone.
fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is the empty set, CPU_SET writes inside it, and
    // sched_setaffinity reads `size_of` bytes of it for this thread (pid 0).
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(
        pinned,
        0,
        "sched_setaffinity to CPU {cpu}: {}",
        std::io::Error::last_os_error()
    );
}

/// The CPUs of the server and of the load client, when there are two to give.
fn pinned_cpus() -> Option<(usize, usize)> {
    if std::env::var("GATEWAY_DNS_BENCH_PIN").is_ok_and(|v| v == "0") {
        return None;
    }
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    (cpus >= 2).then_some((0, 1))
}

fn main() {
    // As the binary does (MIMALLOC_PURGE_DELAY overrides it, to compare).
    gateway_dns::allocator::return_freed_pages_promptly();
    let settings = Settings::from_env();
    let workload = engine_workload();
    let cpus = pinned_cpus();
    // The load client: this thread and its runtime's.
    let mut client = tokio::runtime::Builder::new_multi_thread();
    let mut server = tokio::runtime::Builder::new_multi_thread();
    match cpus {
        Some((server_cpu, client_cpu)) => {
            pin_to(client_cpu);
            client.on_thread_start(move || pin_to(client_cpu));
            server
                .worker_threads(1)
                .on_thread_start(move || pin_to(server_cpu));
            println!(
                "pinned: the server (1 worker thread) on CPU {server_cpu}, the load client on CPU {client_cpu}"
            );
        }
        None => println!("not pinned: server and load client share every CPU"),
    }
    let runtime = client.enable_all().build().expect("tokio runtime");
    let server = server.enable_all().build().expect("tokio runtime");
    runtime.block_on(async {
        let timed = Arc::new(TimedHandler {
            inner: workload.handler.clone(),
            samples: Mutex::new(Vec::new()),
            recording: std::sync::atomic::AtomicBool::new(false),
        });
        let options = WebhookOptions {
            enable_baseline_route: true,
            ..WebhookOptions::default()
        };
        // Started on the server's runtime: its accept loop and connections run there.
        let webhook = server
            .spawn(TestWebhook::start(timed.clone(), options))
            .await
            .expect("the webhook starts");
        let bodies: Arc<Vec<Vec<u8>>> = Arc::new(
            workload
                .reviews
                .iter()
                .map(|review| serde_json::to_vec(review).expect("review JSON"))
                .collect(),
        );
        let mean_body = bodies.iter().map(Vec::len).sum::<usize>() / bodies.len().max(1);
        println!(
            "admission_load: {} connections, {} keep-alive over TLS, {} rounds of {:.1}s per route (+{}ms warm-up each)",
            settings.connections,
            if settings.http2 { "HTTP/2" } else { "HTTP/1.1" },
            settings.rounds,
            settings.duration.as_secs_f64(),
            WARMUP.as_millis()
        );
        println!(
            "workload: {} ({} distinct reviews, mean body {} bytes)",
            workload.label,
            bodies.len(),
            mean_body
        );

        let (mut allowed, mut denied, mut warned) = (0, 0, 0);
        for review in &workload.reviews {
            let request = AdmissionRequest::from_value(&review["request"]).expect("bench review");
            let answer = workload.handler.handle(&request);
            match (answer.allowed, answer.warnings.is_empty()) {
                (false, _) => denied += 1,
                (true, false) => warned += 1,
                (true, true) => allowed += 1,
            }
        }
        println!("answers: {allowed} allowed, {warned} allowed with warnings, {denied} denied");
        if let Some(only) = &settings.only {
            let path = match only.as_str() {
                "baseline" => "/baseline-allow",
                "validate" => "/validate?timeout=10s",
                other => panic!("GATEWAY_DNS_BENCH_ONLY={other}: expected baseline or validate"),
            };
            for round in 1..=settings.rounds {
                let measured = drive(&webhook, path, bodies.clone(), &settings).await;
                println!("round {round}: {path} {:.0} req/s", measured.per_second());
            }
            server.spawn(webhook.stop()).await.expect("the webhook stops");
            return;
        }
        let mut baseline = Measured {
            requests: 0,
            elapsed: Duration::ZERO,
            latencies: Vec::new(),
        };
        let mut validate = Measured {
            requests: 0,
            elapsed: Duration::ZERO,
            latencies: Vec::new(),
        };
        let mut round_ratios = Vec::new();
        for round in 1..=settings.rounds {
            let base = drive(&webhook, "/baseline-allow", bodies.clone(), &settings).await;
            timed
                .recording
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let ours = drive(&webhook, "/validate?timeout=10s", bodies.clone(), &settings).await;
            timed
                .recording
                .store(false, std::sync::atomic::Ordering::Relaxed);
            let ratio = ours.per_second() / base.per_second();
            println!(
                "round {round}: baseline {:.0} req/s, /validate {:.0} req/s, ratio {ratio:.2}",
                base.per_second(),
                ours.per_second()
            );
            round_ratios.push(ratio);
            baseline.merge(base);
            validate.merge(ours);
        }
        round_ratios.sort_by(f64::total_cmp);

        println!(
            "{:<16} {:>9} {:>11} {:>11} {:>11} {:>11}",
            "route", "requests", "req/s", "mean", "p50", "p99"
        );
        for (name, measured) in [("/baseline-allow", &baseline), ("/validate", &validate)] {
            println!(
                "{:<16} {:>9} {:>11.0} {:>11} {:>11} {:>11}",
                name,
                measured.requests,
                measured.per_second(),
                millis(measured.mean()),
                millis(percentile(&measured.latencies, 0.50)),
                millis(percentile(&measured.latencies, 0.99)),
            );
        }
        let mut handler_times = timed.samples.lock().map(|samples| samples.clone()).unwrap_or_default();
        handler_times.sort_unstable();
        println!(
            "handler time on /validate under load: p50 {:.2} µs, p99 {:.2} µs ({} calls timed, one in {SAMPLE_EVERY})",
            percentile(&handler_times, 0.50).as_secs_f64() * 1e6,
            percentile(&handler_times, 0.99).as_secs_f64() * 1e6,
            handler_times.len()
        );
        println!(
            "ratio /validate to baseline: throughput {:.2} (median round {:.2}, rounds {:.2}..{:.2}), p50 {:.2}x, p99 {:.2}x",
            validate.per_second() / baseline.per_second(),
            round_ratios
                .get(round_ratios.len() / 2)
                .copied()
                .unwrap_or_default(),
            round_ratios.first().copied().unwrap_or_default(),
            round_ratios.last().copied().unwrap_or_default(),
            percentile(&validate.latencies, 0.50).as_secs_f64()
                / percentile(&baseline.latencies, 0.50).as_secs_f64(),
            percentile(&validate.latencies, 0.99).as_secs_f64()
                / percentile(&baseline.latencies, 0.99).as_secs_f64(),
        );
        server.spawn(webhook.stop()).await.expect("the webhook stops");
        in_process_costs(&workload, &bodies).await;
    });
}

/// The application's own cost per request, apart from TLS, sockets and the load generator:
/// the same bodies sent through the router in-process, one at a time, for each route, and the
/// handler called directly. What /validate adds over the baseline here is what the
/// throughput ratio above pays for.
async fn in_process_costs(workload: &Workload, bodies: &[Vec<u8>]) {
    use tower::ServiceExt as _;

    const REQUESTS: usize = 100_000;
    let state = gateway_dns::webhook::state::WebhookState::new(
        workload.handler.clone(),
        Arc::new(gateway_dns::metrics::Metrics::new()),
        gateway_dns::webhook::state::Readiness::new(),
        WebhookOptions {
            enable_baseline_route: true,
            ..WebhookOptions::default()
        },
    );
    let router = gateway_dns::webhook::server::router(state);
    let bodies: Vec<bytes::Bytes> = bodies.iter().cloned().map(bytes::Bytes::from).collect();
    let send = |i: usize, path: &'static str| {
        let router = router.clone();
        let body = bodies[i % bodies.len()].clone();
        async move {
            let request = hyper::Request::post(path)
                .header("content-type", "application/json")
                .body(axum::body::Body::from(body))
                .expect("request");
            let response = router.oneshot(request).await.expect("response");
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            let body = http_body_util::BodyExt::collect(response.into_body())
                .await
                .expect("body");
            std::hint::black_box(body);
        }
    };
    let paths = ["/baseline-allow", "/validate?timeout=10s"];
    let mut per_request = Vec::new();
    // Each request also timed alone: on a shared machine the median of single calls is what
    // other load moves least (a preempted call lands in the tail, not in every figure).
    let mut per_request_p50 = Vec::new();
    let mut allocations_per_request = Vec::new();
    for path in paths {
        let mut calls = Vec::with_capacity(REQUESTS);
        let allocated_before = allocations();
        let started = Instant::now();
        for i in 0..REQUESTS {
            let sent = Instant::now();
            send(i, path).await;
            calls.push(sent.elapsed());
        }
        per_request.push(started.elapsed() / REQUESTS as u32);
        // Timing samples are pushed into a vector reserved up front: no allocation of theirs.
        allocations_per_request.push((allocations() - allocated_before) as f64 / REQUESTS as f64);
        calls.sort_unstable();
        per_request_p50.push(percentile(&calls, 0.50));
    }
    // The same with 2 MiB of other memory touched between requests, as the connections'
    // buffers, TLS and the kernel do under load: what the first touch of a request's code and
    // data costs, which hot loops hide.
    let mut other_memory = vec![0u8; 2 << 20];
    let mut cold = Vec::new();
    for path in paths {
        let mut spent = Duration::ZERO;
        for i in 0..REQUESTS / 10 {
            for line in other_memory.iter_mut().step_by(64) {
                *line = line.wrapping_add(1);
            }
            let started = Instant::now();
            send(i, path).await;
            spent += started.elapsed();
        }
        std::hint::black_box(&other_memory);
        cold.push(spent / (REQUESTS / 10) as u32);
    }
    let requests: Vec<AdmissionRequest> = workload
        .reviews
        .iter()
        .map(|review| AdmissionRequest::from_value(&review["request"]).expect("bench review"))
        .collect();
    let allocated_before = allocations();
    let started = Instant::now();
    for i in 0..REQUESTS {
        std::hint::black_box(workload.handler.handle(&requests[i % requests.len()]));
    }
    let handler = started.elapsed() / REQUESTS as u32;
    let handler_allocations = (allocations() - allocated_before) as f64 / REQUESTS as f64;
    // Each call timed alone for the tail (the clock reads add a little to every figure).
    let mut handler_calls: Vec<Duration> = (0..REQUESTS)
        .map(|i| {
            let started = Instant::now();
            std::hint::black_box(workload.handler.handle(&requests[i % requests.len()]));
            started.elapsed()
        })
        .collect();
    handler_calls.sort_unstable();
    // The two other steps /validate adds, each alone: reading the review and writing the answer.
    let allocated_before = allocations();
    let started = Instant::now();
    for i in 0..REQUESTS {
        let review = gateway_dns::webhook::review::parse_review(&bodies[i % bodies.len()]);
        std::hint::black_box(review.expect("bench review"));
    }
    let decode = started.elapsed() / REQUESTS as u32;
    let decode_allocations = (allocations() - allocated_before) as f64 / REQUESTS as f64;
    let mut decode_calls: Vec<Duration> = (0..REQUESTS)
        .map(|i| {
            let started = Instant::now();
            let review = gateway_dns::webhook::review::parse_review(&bodies[i % bodies.len()]);
            std::hint::black_box(review.expect("bench review"));
            started.elapsed()
        })
        .collect();
    decode_calls.sort_unstable();
    let answers: Vec<AdmissionAnswer> = requests
        .iter()
        .map(|request| workload.handler.handle(request))
        .collect();
    let allocated_before = allocations();
    let started = Instant::now();
    for i in 0..REQUESTS {
        let k = i % answers.len();
        std::hint::black_box(gateway_dns::webhook::encode::encode_review_response(
            &requests[k].uid,
            &answers[k],
        ));
    }
    let encode = started.elapsed() / REQUESTS as u32;
    let encode_allocations = (allocations() - allocated_before) as f64 / REQUESTS as f64;
    let micros = |duration: Duration| duration.as_secs_f64() * 1e6;
    println!(
        "in-process cost per request (router, no TLS or socket, hot caches): baseline {:.2} µs, /validate {:.2} µs, of which the handler {:.2} µs, decoding {:.2} µs, encoding {:.2} µs, the rest of /validate over the baseline {:.2} µs",
        micros(per_request[0]),
        micros(per_request[1]),
        micros(handler),
        micros(decode),
        micros(encode),
        micros(per_request[1])
            - micros(per_request[0])
            - micros(handler)
            - micros(decode)
            - micros(encode),
    );
    println!(
        "handler time in process, each call timed: p50 {:.2} µs, p99 {:.2} µs, max {:.2} µs",
        micros(percentile(&handler_calls, 0.50)),
        micros(percentile(&handler_calls, 0.99)),
        micros(handler_calls.last().copied().unwrap_or_default()),
    );
    println!(
        "in-process medians, each call timed alone (what other load on the machine moves least): baseline {:.2} µs, /validate {:.2} µs (difference {:.2} µs), decoding {:.2} µs, handler {:.2} µs",
        micros(per_request_p50[0]),
        micros(per_request_p50[1]),
        micros(per_request_p50[1]) - micros(per_request_p50[0]),
        micros(percentile(&decode_calls, 0.50)),
        micros(percentile(&handler_calls, 0.50)),
    );
    println!(
        "allocations per request in process: baseline {:.1}, /validate {:.1}, of which the handler {:.1}, decoding {:.1}, encoding {:.1}",
        allocations_per_request[0],
        allocations_per_request[1],
        handler_allocations,
        decode_allocations,
        encode_allocations,
    );
    println!(
        "in-process cost per request with cold caches (2 MiB touched between requests): baseline {:.2} µs, /validate {:.2} µs",
        cold[0].as_secs_f64() * 1e6,
        cold[1].as_secs_f64() * 1e6,
    );
}
