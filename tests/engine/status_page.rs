//! The status page's routes through `oneshot`, over the seed story (examples/cluster) as files:
//! the overview's counts, the names table's filters, sort and pages, the findings, a name's
//! page, and what a bad query gets. The page in a real browser is tests/cluster/status_page.rs.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt as _;
use serde_json::Value;
use tower::ServiceExt as _;

use gateway_dns::engine::Config;
use gateway_dns::index::Index;
use gateway_dns::metrics::Metrics;
use gateway_dns::source::files;
use gateway_dns::status::{self, Context, StatusState, view};

use crate::objects::crate_dir;

fn seed_story() -> Index {
    let zones = vec!["example.com".to_owned()];
    let index = Index::with_config(Arc::new(Config::default().with_zones(&zones)));
    let loaded = files::load_paths(&[crate_dir().join("examples/cluster")]).expect("examples load");
    index.replace_all(loaded.into_iter().map(|l| l.object).collect());
    index
}

fn app(index: &Index) -> Router {
    status::router(StatusState::new(
        index.clone(),
        Arc::new(Metrics::new()),
        Context {
            provider: Some("rfc2136"),
            zones: vec!["example.com".to_owned()],
            owner_id: "west".to_owned(),
            lease_holder: None,
        },
    ))
}

async fn get(app: &Router, uri: &str) -> (StatusCode, String, Option<String>) {
    let response = app
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let csp = response
        .headers()
        .get(header::CONTENT_SECURITY_POLICY)
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap(), csp)
}

async fn json(app: &Router, uri: &str) -> Value {
    let (status, body, _) = get(app, uri).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{uri}: {e}: {body}"))
}

fn names(status: &Value) -> Vec<&str> {
    status["names"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["name"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_overview_counts_what_the_engine_settles() {
    let index = seed_story();
    let app = app(&index);
    let outcome = index.settled();
    let status = json(&app, "/status.json").await;
    let overview = &status["overview"];
    assert_eq!(overview["records"], outcome.records.len());
    assert_eq!(overview["findings"], outcome.violations.len());
    assert_eq!(overview["findingsByReason"]["HostnameConflict"], 1);
    assert_eq!(overview["health"]["ownerId"], "west");
    assert_eq!(overview["health"]["provider"], "rfc2136");
    // No sync pass ran: none is claimed.
    assert_eq!(overview["health"]["lastSuccessfulSync"], Value::Null);

    let (code, html, csp) = get(&app, "/").await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        html.contains(r#"<div class="figure" id="count-records">2</div>"#),
        "{html}"
    );
    assert!(html.contains("HostnameConflict"), "{html}");
    // Nothing is loaded from elsewhere, and the header says so to the browser too: the style
    // sheet and the script come from this listener.
    assert!(
        csp.unwrap()
            .starts_with("default-src 'none'; style-src 'self'; script-src 'self'")
    );
    for outside in ["http://", "https://", "//"] {
        assert!(!html.contains(outside), "{outside} in the page");
    }
    assert!(html.contains(r#"<link rel="stylesheet" href="/status.css">"#));
    let (code, css, _) = get(&app, "/status.css").await;
    assert_eq!(code, StatusCode::OK);
    assert!(css.contains("body {"), "{css}");
    let (_, names, _) = get(&app, "/names").await;
    assert!(names.contains(r#"<script src="/status.js"></script>"#));
    let (code, js, _) = get(&app, "/status.js").await;
    assert_eq!(code, StatusCode::OK);
    assert!(js.contains("filter-text"), "{js}");
}

#[tokio::test]
async fn what_a_request_says_is_escaped_never_markup() {
    let app = app(&seed_story());
    let (code, html, _) = get(
        &app,
        "/names?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E&namespace=%22%3E%3Cb%3E",
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    assert!(!html.contains("<script>alert"), "{html}");
    assert!(!html.contains("\"><b>"), "{html}");
    assert!(html.contains("&#60;script&#62;alert(1)"), "{html}");
    // A name that is not one is refused as text that no browser renders as a page.
    let response = app
        .clone()
        .oneshot(
            Request::get("/names/%3Cimg%20src=x%3E.example.com")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/plain; charset=utf-8"
    );
    assert_eq!(
        response.headers()[header::X_CONTENT_TYPE_OPTIONS],
        "nosniff"
    );
}

#[tokio::test]
async fn the_conflict_on_b_is_shown_with_the_route_that_keeps_the_name() {
    let app = app(&seed_story());
    let status = json(&app, "/status.json").await;
    let rows = status["names"]["rows"].as_array().unwrap();
    let b = rows
        .iter()
        .find(|row| row["name"] == "b.example.com")
        .expect("b.example.com has a row");
    assert_eq!(b["routes"], serde_json::json!(["HTTPRoute/apps/b1"]));
    assert_eq!(b["gateways"], serde_json::json!(["infra/gw1"]));
    assert_eq!(b["targets"], serde_json::json!(["203.0.113.10"]));
    assert_eq!(b["owner"], "west");
    assert_eq!(b["zone"], "example.com");
    assert_eq!(b["reasons"], serde_json::json!(["HostnameConflict"]));

    let findings = &status["findings"];
    let apps = findings
        .as_array()
        .unwrap()
        .iter()
        .find(|group| group["namespace"] == "apps")
        .expect("apps has findings");
    let conflict = apps["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["reason"] == "HostnameConflict")
        .unwrap();
    assert_eq!(conflict["object"], "HTTPRoute/apps/b2");
    // The webhook's line: `Reason: message`.
    assert!(
        conflict["line"]
            .as_str()
            .unwrap()
            .starts_with("HostnameConflict: "),
        "{conflict}"
    );
    let (_, html, _) = get(&app, "/findings").await;
    assert!(html.contains("Namespace apps"), "{html}");
    assert!(
        html.contains(
            conflict["line"]
                .as_str()
                .unwrap()
                .split(" (")
                .next()
                .unwrap()
        )
    );
}

#[tokio::test]
async fn filters_narrow_the_table_and_each_view_has_its_own_url() {
    let app = app(&seed_story());
    let all = json(&app, "/status.json").await;
    assert!(names(&all).len() >= 2, "{all}");
    let by_reason = json(&app, "/status.json?reason=HostnameConflict").await;
    assert_eq!(names(&by_reason), ["b.example.com"]);
    assert_eq!(by_reason["names"]["total"], all["names"]["total"]);
    let by_text = json(&app, "/status.json?q=A.EXAMPLE").await;
    assert_eq!(names(&by_text), ["a.example.com"]);
    let by_gateway = json(&app, "/status.json?gateway=infra/gw1").await;
    assert!(names(&by_gateway).contains(&"b.example.com"));
    let elsewhere = json(&app, "/status.json?namespace=nowhere").await;
    assert!(names(&elsewhere).is_empty());
    assert_eq!(elsewhere["names"]["matched"], 0);

    let descending = json(&app, "/status.json?sort=name&order=desc").await;
    let mut sorted = names(&all);
    sorted.reverse();
    assert_eq!(names(&descending), sorted);

    // One row a page: two pages, linked both ways.
    let first = json(&app, "/status.json?per_page=1").await;
    assert_eq!(first["names"]["pages"], all["names"]["matched"]);
    let (_, html, _) = get(&app, "/names?per_page=1&reason=").await;
    assert!(
        html.contains(r#"href="/names?page=2&#38;per_page=1" rel="next""#),
        "{html}"
    );
    let (_, html, _) = get(&app, "/names?per_page=1&page=2").await;
    assert!(html.contains(r#"rel="prev""#), "{html}");
    // The form keeps what was asked.
    let (_, html, _) = get(&app, "/names?reason=HostnameConflict&q=b.").await;
    assert!(
        html.contains("<option selected>HostnameConflict</option>"),
        "{html}"
    );
    assert!(html.contains(r#"value="b.""#), "{html}");
    assert!(!html.contains(r#"data-name="a.example.com""#), "{html}");
}

#[tokio::test]
async fn a_name_page_is_what_explain_says() {
    let index = seed_story();
    let app = app(&index);
    let (code, html, _) = get(&app, "/names/B.Example.com").await;
    assert_eq!(code, StatusCode::OK, "{html}");
    assert!(html.contains("kept by HTTPRoute/apps/b1"), "{html}");
    let explained = json(&app, "/names/b.example.com/explain.json").await;
    assert_eq!(explained["explains"], "name");
    assert_eq!(explained["name"], "b.example.com");
    assert_eq!(explained["winner"], "HTTPRoute/apps/b1");
    let routes: Vec<&str> = explained["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["route"].as_str().unwrap())
        .collect();
    assert_eq!(routes, ["HTTPRoute/apps/b1", "HTTPRoute/apps/b2"]);
    assert_eq!(explained["provider"]["consulted"], false);
}

#[tokio::test]
async fn bad_queries_and_names_are_told_what_is_wrong() {
    let app = app(&seed_story());
    let (code, body, _) = get(&app, "/names?page=two").await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(body.contains("page"), "{body}");
    let (code, body, _) = get(&app, "/names/bad_name!.example.com").await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(body.contains("is not a valid DNS name"), "{body}");
    // More rows than a page may hold are capped, not refused.
    let capped = json(&app, "/status.json?per_page=100000").await;
    assert_eq!(capped["names"]["pages"], 1);
}

#[test]
fn a_build_out_of_time_says_the_table_is_partial() {
    let index = seed_story();
    let (snapshot, outcome) = index.settled_with_snapshot();
    let query = view::NameQuery::default();
    let (rows, total, partial) = view::rows(
        &*snapshot,
        &outcome,
        &[],
        "west",
        &query,
        Instant::now() - std::time::Duration::from_millis(1),
    );
    assert!(partial);
    assert!(rows.is_empty());
    assert_eq!(total, 3, "every row counts, made or not");
    let page = view::names_page(rows, total, partial, &query);
    assert!(page.partial);
    assert_eq!((page.pages, page.total, page.matched), (1, 3, 0));
}

#[test]
fn descending_keeps_ties_in_name_order_and_ttl_sorts_as_published() {
    let index = seed_story();
    let (snapshot, outcome) = index.settled_with_snapshot();
    let query = |sort: &str, order: &str| view::NameQuery {
        sort: sort.to_owned(),
        order: order.to_owned(),
        ..view::NameQuery::default()
    };
    let names = |q: &view::NameQuery| {
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let (rows, total, partial) = view::rows(&*snapshot, &outcome, &[], "west", q, far);
        view::names_page(rows, total, partial, q)
            .rows
            .into_iter()
            .map(|r| r.name)
            .collect::<Vec<_>>()
    };
    // a and b share gw1's target: a tie, kept in name order both ways; d has none.
    assert_eq!(
        names(&query("targets", "")),
        ["d.example.com", "a.example.com", "b.example.com"]
    );
    assert_eq!(
        names(&query("targets", "desc")),
        ["a.example.com", "b.example.com", "d.example.com"]
    );
    // Both records have the default TTL; the unpublished name sorts last.
    assert_eq!(
        names(&query("ttl", "")),
        ["a.example.com", "b.example.com", "d.example.com"]
    );
}
