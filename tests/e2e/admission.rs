//! Admission decisions over real HTTPS: the engine-backed handler behind the real server, called
//! as kube-apiserver calls it, with one fixture review per reason plus the example-cluster story.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gateway_dns::engine::{Config, HostnameOwnership};
use gateway_dns::index::Index;
use gateway_dns::metrics::Metrics;
use gateway_dns::webhook::handler::EngineHandler;
use gateway_dns::webhook::state::WebhookOptions;
use hyper::http::StatusCode;
use serde_json::Value;

use crate::support::webhook::TestWebhook;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn index_of(dir: &Path, cfg: Config) -> Index {
    let loaded = gateway_dns::source::files::load_paths(&[dir.to_path_buf()])
        .expect("fixture cluster loads");
    let index = Index::with_config(Arc::new(cfg));
    index.replace_all(loaded.into_iter().map(|l| l.object).collect());
    index
}

async fn webhook_for(cluster: &Path) -> (TestWebhook, Index) {
    webhook_with(cluster, Config::default()).await
}

async fn webhook_with(cluster: &Path, cfg: Config) -> (TestWebhook, Index) {
    let index = index_of(cluster, cfg);
    let handler = Arc::new(EngineHandler::new(index.clone(), Arc::new(Metrics::new())));
    (
        TestWebhook::start(handler, WebhookOptions::default()).await,
        index,
    )
}

fn read_review(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// What a review must get back.
struct Expect {
    allowed: bool,
    /// `status.details.causes[].reason`, in order.
    deny: &'static [&'static str],
    /// Reason prefixes of the warnings, in order.
    warn: &'static [&'static str],
}

fn check_response(name: &str, status: StatusCode, body: &Value, uid: &str, expect: &Expect) {
    assert_eq!(status, StatusCode::OK, "{name}: HTTP status; body {body}");
    let response = &body["response"];
    assert_eq!(response["uid"], uid, "{name}: uid echoed");
    assert_eq!(
        response["allowed"], expect.allowed,
        "{name}: allowed; body {body}"
    );
    let causes: Vec<&str> = response["status"]["details"]["causes"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["reason"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(causes, expect.deny, "{name}: denial causes; body {body}");
    if !expect.allowed {
        assert_eq!(response["status"]["code"], 403, "{name}");
        assert_eq!(response["status"]["reason"], "Forbidden", "{name}");
        let message = response["status"]["message"].as_str().unwrap_or("");
        assert_eq!(
            message.lines().count(),
            expect.deny.len(),
            "{name}: one line per denial: {message}"
        );
        for cause in response["status"]["details"]["causes"].as_array().unwrap() {
            assert!(
                cause["field"]
                    .as_str()
                    .is_some_and(|f| f.starts_with("spec.") || f.starts_with("metadata.")),
                "{name}: field {cause}"
            );
            assert!(
                !cause["message"].as_str().unwrap_or("").is_empty(),
                "{name}: message"
            );
        }
    }
    let warnings: Vec<&str> = response["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let prefixes: Vec<&str> = warnings
        .iter()
        .map(|w| w.split(':').next().unwrap_or(""))
        .collect();
    assert_eq!(
        prefixes, expect.warn,
        "{name}: warning reasons; warnings {warnings:?}"
    );
}

const CASES: &[(&str, Expect)] = &[
    (
        "hostname-conflict",
        Expect {
            allowed: false,
            deny: &["HostnameConflict"],
            warn: &[],
        },
    ),
    (
        "no-matching-listener-hostname",
        Expect {
            allowed: false,
            deny: &["NoMatchingListenerHostname"],
            warn: &[],
        },
    ),
    (
        "hostname-outside-listener",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["HostnameOutsideListener"],
        },
    ),
    (
        "invalid-hostname",
        Expect {
            allowed: false,
            deny: &["InvalidHostname"],
            warn: &[],
        },
    ),
    (
        "not-allowed-by-listeners",
        Expect {
            allowed: false,
            deny: &["NotAllowedByListeners"],
            warn: &[],
        },
    ),
    (
        "no-matching-parent",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["NoMatchingParent"],
        },
    ),
    (
        "parent-not-found",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["ParentNotFound"],
        },
    ),
    (
        "no-parent-refs",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["NoParentRefs"],
        },
    ),
    (
        "gateway-has-no-address",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["GatewayHasNoAddress"],
        },
    ),
    (
        "gateway-not-programmed",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["GatewayNotProgrammed"],
        },
    ),
    (
        "inherited-wildcard-hostname",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["InheritedWildcardHostname"],
        },
    ),
    // The old object already conflicted: a pre-existing finding only warns on UPDATE.
    (
        "update-preexisting-conflict",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["HostnameConflict"],
        },
    ),
    (
        "update-adds-conflict",
        Expect {
            allowed: false,
            deny: &["HostnameConflict"],
            warn: &[],
        },
    ),
    (
        "namespace-warn-mode",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["HostnameConflict"],
        },
    ),
    (
        "namespace-audit-mode",
        Expect {
            allowed: true,
            deny: &[],
            warn: &[],
        },
    ),
    (
        "delete",
        Expect {
            allowed: true,
            deny: &[],
            warn: &[],
        },
    ),
    (
        "dry-run-conflict",
        Expect {
            allowed: false,
            deny: &["HostnameConflict"],
            warn: &[],
        },
    ),
    (
        "v1beta1-conflict",
        Expect {
            allowed: false,
            deny: &["HostnameConflict"],
            warn: &[],
        },
    ),
    (
        "tcproute-annotation-conflict",
        Expect {
            allowed: false,
            deny: &["HostnameConflict"],
            warn: &[],
        },
    ),
    // Gateway changes are never denied; they name the routes whose names they would drop.
    (
        "gateway-update-drops-names",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["NoMatchingListenerHostname"],
        },
    ),
    // A Namespace's domains: a name outside them is denied...
    (
        "hostname-not-allowed-for-namespace",
        Expect {
            allowed: false,
            deny: &["HostnameNotAllowedForNamespace"],
            warn: &[],
        },
    ),
    // ...and narrowing them is never denied; it names the routes that would lose names.
    (
        "namespace-update-unpublishes",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["HostnameNotAllowedForNamespace"],
        },
    ),
    // Oversized routes are denied without being expanded.
    (
        "too-many-hostnames",
        Expect {
            allowed: false,
            deny: &["TooManyHostnames"],
            warn: &[],
        },
    ),
    (
        "too-many-parent-refs",
        Expect {
            allowed: false,
            deny: &["TooManyParentRefs"],
            warn: &[],
        },
    ),
    (
        "route-target-not-allowed",
        Expect {
            allowed: false,
            deny: &["RouteTargetNotAllowed"],
            warn: &[],
        },
    ),
    (
        "cname-not-allowed",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["CnameNotAllowed"],
        },
    ),
    (
        "ttl-conflict",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["TtlConflict"],
        },
    ),
    (
        "unreadable-object",
        Expect {
            allowed: true,
            deny: &[],
            warn: &["EvaluationError"],
        },
    ),
];

#[tokio::test]
async fn one_review_per_reason_over_https() {
    let fixtures = root().join("tests/fixtures/admission");
    let (webhook, _index) = webhook_for(&fixtures).await;
    let mut connection = webhook.connect().await;
    for (name, expect) in CASES {
        let review = read_review(&fixtures.join(format!("reviews/{name}.json")));
        let uid = review["request"]["uid"].as_str().unwrap().to_owned();
        let (status, body) = connection.post_review(&review).await;
        check_response(name, status, &body, &uid, expect);
    }
    webhook.stop().await;
}

#[tokio::test]
async fn denial_messages_name_the_incumbent_and_what_to_do() {
    let fixtures = root().join("tests/fixtures/admission");
    let (webhook, _index) = webhook_for(&fixtures).await;
    let review = read_review(&fixtures.join("reviews/hostname-conflict.json"));
    let (_, body) = webhook.connect().await.post_review(&review).await;
    let cause = &body["response"]["status"]["details"]["causes"][0];
    assert_eq!(cause["field"], "spec.hostnames[0]");
    let message = cause["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "app.example.com is already served by Gateway infra/public (203.0.113.10)"
        ),
        "{message}"
    );
    assert!(message.contains("HTTPRoute apps/web"), "{message}");
    assert!(
        message.contains("attach to infra/public or drop the hostname"),
        "{message}"
    );
    let gateway = read_review(&fixtures.join("reviews/gateway-update-drops-names.json"));
    let (_, body) = webhook.connect().await.post_review(&gateway).await;
    let warnings = body["response"]["warnings"].to_string();
    for route in [
        "HTTPRoute/apps/web",
        "HTTPRoute/apps/legacy",
        "HTTPRoute/apps/grow",
    ] {
        assert_eq!(
            warnings.contains(route),
            route == "HTTPRoute/apps/web",
            "{route} in {warnings}"
        );
    }
    webhook.stop().await;
}

#[tokio::test]
async fn hostname_ownership_denies_the_newcomer_naming_the_owner_over_https() {
    let fixtures = root().join("tests/fixtures/admission");
    let review = read_review(&fixtures.join("reviews/hostname-owned-by-other-namespace.json"));
    let owned = Config {
        hostname_ownership: HostnameOwnership::Namespace,
        ..Config::default()
    };
    let (webhook, _index) = webhook_with(&fixtures, owned).await;
    let (status, body) = webhook.connect().await.post_review(&review).await;
    let expect = Expect {
        allowed: false,
        deny: &["HostnameOwnedByOtherNamespace"],
        warn: &[],
    };
    check_response("ownership", status, &body, "u-owned", &expect);
    let cause = &body["response"]["status"]["details"]["causes"][0];
    assert_eq!(cause["field"], "spec.hostnames[0]");
    assert_eq!(
        cause["message"],
        "app.example.com belongs to namespace apps, where HTTPRoute apps/web claimed it first; \
         use another hostname, or ask the owners of apps to add team-b to its Namespace \
         annotation gateway-dns.io/share-hostnames-with"
    );
    webhook.stop().await;
    // Off (the default), the same route on the owner's own Gateway is no ownership matter
    // (it still meets the older conflict on app.example.com through infra/other).
    let (webhook, _index) = webhook_for(&fixtures).await;
    let (_, body) = webhook.connect().await.post_review(&review).await;
    assert!(
        !body.to_string().contains("HostnameOwnedByOtherNamespace"),
        "{body}"
    );
    webhook.stop().await;
}

#[tokio::test]
async fn the_example_cluster_story() {
    let (webhook, _index) = webhook_for(&root().join("examples/cluster")).await;
    let reviews = root().join("examples/admission");
    let story = [
        (
            "b2-conflict",
            Expect {
                allowed: false,
                deny: &["HostnameConflict"],
                warn: &[],
            },
        ),
        (
            "d1-outside-listener",
            Expect {
                allowed: false,
                deny: &["NoMatchingListenerHostname"],
                warn: &[],
            },
        ),
        (
            "clean",
            Expect {
                allowed: true,
                deny: &[],
                warn: &[],
            },
        ),
        (
            "warning-only",
            Expect {
                allowed: true,
                deny: &[],
                warn: &["HostnameOutsideListener"],
            },
        ),
    ];
    let mut connection = webhook.connect().await;
    for (name, expect) in &story {
        let review = read_review(&reviews.join(format!("{name}.json")));
        let uid = review["request"]["uid"].as_str().unwrap().to_owned();
        let (status, body) = connection.post_review(&review).await;
        check_response(name, status, &body, &uid, expect);
    }
    webhook.stop().await;
}

#[tokio::test]
async fn the_index_changes_the_answer() {
    let fixtures = root().join("tests/fixtures/admission");
    let (webhook, index) = webhook_for(&fixtures).await;
    let review = read_review(&fixtures.join("reviews/hostname-conflict.json"));
    let (_, before) = webhook.connect().await.post_review(&review).await;
    assert_eq!(before["response"]["allowed"], false);
    // Both holders of app.example.com go away: the newcomer is now welcome.
    for name in ["web", "legacy"] {
        index.delete(&gateway_dns::model::ObjectKey::new(
            gateway_dns::model::ObjectKind::HTTPRoute,
            "apps",
            name,
        ));
    }
    let (_, after) = webhook.connect().await.post_review(&review).await;
    assert_eq!(after["response"]["allowed"], true, "{after}");
    webhook.stop().await;
}

#[tokio::test]
async fn concurrent_answers_equal_sequential_ones() {
    let fixtures = root().join("tests/fixtures/admission");
    let (webhook, _index) = webhook_for(&fixtures).await;
    let reviews: Vec<Value> = CASES
        .iter()
        .map(|(name, _)| read_review(&fixtures.join(format!("reviews/{name}.json"))))
        .collect();
    let mut sequential = Vec::new();
    let mut connection = webhook.connect().await;
    for review in &reviews {
        sequential.push(connection.post_review(review).await.1);
    }
    let webhook = Arc::new(webhook);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200 {
        let webhook = webhook.clone();
        let review = reviews[i % reviews.len()].clone();
        tasks.spawn(async move { (i, webhook.connect().await.post_review(&review).await.1) });
    }
    let mut answered = 0;
    while let Some(result) = tasks.join_next().await {
        let (i, body) = result.unwrap();
        assert_eq!(body, sequential[i % reviews.len()], "request {i}");
        answered += 1;
    }
    assert_eq!(answered, 200);
}
