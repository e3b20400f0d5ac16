//! The API double itself, exercised through kube-rs's real client, discovery and watcher.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::support::apiserver::{
    ApiServer, GATEWAY_GROUP, gateway_api_type, gateway_api_v1_6_standard, lease_type,
    namespace_type,
};

fn route_resource(version: &str) -> ApiResource {
    ApiResource {
        group: GATEWAY_GROUP.into(),
        version: version.into(),
        api_version: format!("{GATEWAY_GROUP}/{version}"),
        kind: "HTTPRoute".into(),
        plural: "httproutes".into(),
    }
}

fn route(namespace: &str, name: &str, hostname: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"namespace": namespace, "name": name, "labels": {"app": name}},
        "spec": {"hostnames": [hostname], "parentRefs": [{"name": "gw"}]},
    })
}

fn name_of(object: &DynamicObject) -> String {
    format!(
        "{}/{}",
        object.metadata.namespace.clone().unwrap_or_default(),
        object.metadata.name.clone().unwrap_or_default()
    )
}

/// Polls `condition` every 10 ms for at most `limit`.
async fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    condition()
}

#[tokio::test]
async fn discovery_reflects_installed_crds() {
    let server = ApiServer::start().await;
    let client = server.client().await;

    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    let group = discovery.get(GATEWAY_GROUP).expect("gateway group served");
    assert_eq!(group.preferred_version(), Some("v1"));
    let versions: Vec<&str> = group.versions().collect();
    assert_eq!(versions, ["v1", "v1beta1", "v1alpha3", "v1alpha2"]);
    let v1_kinds: Vec<String> = group
        .versioned_resources("v1")
        .into_iter()
        .map(|(r, _)| r.kind)
        .collect();
    for kind in [
        "Gateway",
        "ListenerSet",
        "HTTPRoute",
        "GRPCRoute",
        "TLSRoute",
        "TCPRoute",
        "UDPRoute",
    ] {
        assert!(
            v1_kinds.contains(&kind.to_string()),
            "{kind} at v1: {v1_kinds:?}"
        );
    }
    let v1alpha2: Vec<String> = group
        .versioned_resources("v1alpha2")
        .into_iter()
        .map(|(r, _)| r.kind)
        .collect();
    assert_eq!(v1alpha2.len(), 3, "{v1alpha2:?}");
    assert!(discovery.get("coordination.k8s.io").is_some());
    let core = discovery.get("").expect("core group");
    assert!(
        core.versioned_resources("v1")
            .iter()
            .any(|(r, _)| r.kind == "Namespace")
    );

    server.uninstall("TCPRoute");
    let resources = client
        .list_api_group_resources("gateway.networking.k8s.io/v1")
        .await
        .unwrap();
    assert!(!resources.resources.iter().any(|r| r.name == "tcproutes"));
    assert!(resources.resources.iter().any(|r| r.name == "httproutes"));
    let tcp: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(GATEWAY_GROUP, "v1", "TCPRoute"),
            "tcproutes",
        ),
    );
    let err = tcp.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );

    server.install(gateway_api_type("TCPRoute", "tcproutes", &["v1"]));
    let resources = client
        .list_api_group_resources("gateway.networking.k8s.io/v1")
        .await
        .unwrap();
    assert!(resources.resources.iter().any(|r| r.name == "tcproutes"));
    assert!(
        tcp.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // A group with no CRD left disappears from /apis.
    let empty = ApiServer::builder()
        .resources(vec![namespace_type(), lease_type()])
        .start()
        .await;
    let groups = empty.client().await.list_api_groups().await.unwrap();
    assert!(!groups.groups.iter().any(|g| g.name == GATEWAY_GROUP));
}

#[tokio::test]
async fn objects_are_served_at_every_served_version_only() {
    let server = ApiServer::builder()
        .resources([vec![namespace_type()], gateway_api_v1_6_standard()].concat())
        .start()
        .await;
    let client = server.client().await;
    let created = server
        .create(route("shop", "web", "a.example.com"))
        .unwrap();
    assert_eq!(created["metadata"]["generation"], 1);
    assert!(
        created["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    assert!(
        created["metadata"]["creationTimestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );

    let beta: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "shop", &route_resource("v1beta1"));
    let got = beta.get("web").await.unwrap();
    assert_eq!(
        got.types.unwrap().api_version,
        "gateway.networking.k8s.io/v1beta1"
    );
    assert_eq!(got.data["spec"]["hostnames"][0], "a.example.com");

    // Standard channel v1.6: TCPRoute is served at v1 only.
    let alpha = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(GATEWAY_GROUP, "v1alpha2", "TCPRoute"),
        "tcproutes",
    );
    let err = Api::<DynamicObject>::all_with(client, &alpha)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );
}

#[tokio::test]
async fn generation_moves_with_spec_not_status() {
    let server = ApiServer::start().await;
    let created = server
        .create(route("shop", "web", "a.example.com"))
        .unwrap();
    let mut with_status = created.clone();
    with_status["status"] = json!({"parents": []});
    let replaced = server.replace(with_status).unwrap();
    assert_eq!(replaced["metadata"]["generation"], 1);
    let mut with_spec = replaced.clone();
    with_spec["spec"]["hostnames"] = json!(["b.example.com"]);
    let replaced = server.replace(with_spec).unwrap();
    assert_eq!(replaced["metadata"]["generation"], 2);
    assert_eq!(replaced["metadata"]["uid"], created["metadata"]["uid"]);
    // A stale resourceVersion is a conflict.
    let err = server.replace(created).unwrap_err();
    assert_eq!(err.code, 409);
}

#[tokio::test]
async fn paged_list_is_one_consistent_snapshot() {
    let server = ApiServer::start().await;
    for i in 0..25 {
        server
            .create(route(
                "shop",
                &format!("r{i:02}"),
                &format!("h{i}.example.com"),
            ))
            .unwrap();
    }
    let client = server.client().await;
    let api: Api<DynamicObject> = Api::all_with(client, &route_resource("v1"));
    let first = api.list(&ListParams::default().limit(10)).await.unwrap();
    assert_eq!(first.items.len(), 10);
    let snapshot_rv = first.metadata.resource_version.clone().unwrap();
    let token = first.metadata.continue_.clone().expect("continue token");

    // Changes after the first page must not show up in later pages.
    server.delete("HTTPRoute", "shop", "r15").unwrap();
    server
        .create(route("shop", "r99", "new.example.com"))
        .unwrap();
    let mut changed = server.get("HTTPRoute", "shop", "r20").unwrap();
    changed["spec"]["hostnames"] = json!(["changed.example.com"]);
    server.replace(changed).unwrap();

    let mut names: Vec<String> = first.items.iter().map(name_of).collect();
    let mut token = Some(token);
    let mut pages = 1;
    while let Some(t) = token {
        let page = api
            .list(&ListParams::default().limit(10).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(snapshot_rv.as_str())
        );
        for item in &page.items {
            if item.metadata.name.as_deref() == Some("r20") {
                assert_eq!(
                    item.data["spec"]["hostnames"][0], "h20.example.com",
                    "page shows the snapshot"
                );
            }
        }
        names.extend(page.items.iter().map(name_of));
        token = page.metadata.continue_.clone().filter(|t| !t.is_empty());
        pages += 1;
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..25).map(|i| format!("shop/r{i:02}")).collect();
    assert_eq!(names, expected);

    // A fresh list sees the changes.
    let now = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(now.items.len(), 25);
    assert!(
        now.items
            .iter()
            .any(|o| o.metadata.name.as_deref() == Some("r99"))
    );

    // A continue token older than the retained history is 410 Expired.
    let first = api.list(&ListParams::default().limit(10)).await.unwrap();
    server
        .create(route("shop", "later", "later.example.com"))
        .unwrap();
    server.compact();
    let err = api
        .list(
            &ListParams::default()
                .limit(10)
                .continue_token(first.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 410),
        "{err:?}"
    );
}

#[tokio::test]
async fn label_selectors_filter_lists_and_watches() {
    let server = ApiServer::start().await;
    for (name, env) in [("a", "prod"), ("b", "dev"), ("c", "prod")] {
        let mut object = route("shop", name, "x.example.com");
        object["metadata"]["labels"] = json!({"env": env});
        server.create(object).unwrap();
    }
    let client = server.client().await;
    let api: Api<DynamicObject> = Api::namespaced_with(client, "shop", &route_resource("v1"));
    let prod = api
        .list(&ListParams::default().labels("env=prod"))
        .await
        .unwrap();
    assert_eq!(
        prod.items.iter().map(name_of).collect::<Vec<_>>(),
        ["shop/a", "shop/c"]
    );
    let not_prod = api
        .list(&ListParams::default().labels("env!=prod"))
        .await
        .unwrap();
    assert_eq!(not_prod.items.len(), 1);
    let set = api
        .list(&ListParams::default().labels("env in (dev,test)"))
        .await
        .unwrap();
    assert_eq!(
        set.items.iter().map(name_of).collect::<Vec<_>>(),
        ["shop/b"]
    );

    // An object that stops matching a watch's selector is DELETED for that watch.
    let rv = prod.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("env=prod"), &rv)
        .await
        .unwrap()
        .boxed();
    let mut a = server.get("HTTPRoute", "shop", "a").unwrap();
    a["metadata"]["labels"]["env"] = json!("dev");
    server.replace(a).unwrap();
    let mut b = server.get("HTTPRoute", "shop", "b").unwrap();
    b["metadata"]["labels"]["env"] = json!("prod");
    server.replace(b).unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(first, WatchEvent::Deleted(ref o) if o.metadata.name.as_deref() == Some("a")),
        "{first:?}"
    );
    let second = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(second, WatchEvent::Added(ref o) if o.metadata.name.as_deref() == Some("b")),
        "{second:?}"
    );
}

#[tokio::test]
async fn watch_delivers_changes_and_bookmarks() {
    let server = ApiServer::builder().bookmark_interval(None).start().await;
    server
        .create(route("shop", "web", "a.example.com"))
        .unwrap();
    let client = server.client().await;
    let api: Api<DynamicObject> = Api::all_with(client, &route_resource("v1"));
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    server
        .create(route("shop", "api", "b.example.com"))
        .unwrap();
    let mut web = server.get("HTTPRoute", "shop", "web").unwrap();
    web["spec"]["hostnames"] = json!(["c.example.com"]);
    server.replace(web).unwrap();
    server.delete("HTTPRoute", "shop", "api").unwrap();
    server.send_bookmarks();

    let mut seen = Vec::new();
    let mut last_rv = 0u64;
    while seen.len() < 4 {
        let event = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let (label, rv) = match &event {
            WatchEvent::Added(o) => (
                format!("ADDED {}", name_of(o)),
                o.metadata.resource_version.clone(),
            ),
            WatchEvent::Modified(o) => (
                format!("MODIFIED {}", name_of(o)),
                o.metadata.resource_version.clone(),
            ),
            WatchEvent::Deleted(o) => (
                format!("DELETED {}", name_of(o)),
                o.metadata.resource_version.clone(),
            ),
            WatchEvent::Bookmark(b) => (
                "BOOKMARK".to_string(),
                Some(b.metadata.resource_version.clone()),
            ),
            WatchEvent::Error(e) => panic!("unexpected error event {e:?}"),
        };
        let rv: u64 = rv.unwrap().parse().unwrap();
        assert!(
            rv >= last_rv,
            "resourceVersions never go back along the stream"
        );
        last_rv = rv;
        seen.push(label);
    }
    assert_eq!(
        seen,
        [
            "ADDED shop/api",
            "MODIFIED shop/web",
            "DELETED shop/api",
            "BOOKMARK"
        ]
    );
    assert_eq!(last_rv, server.resource_version());

    // Resuming from the list's resourceVersion replays the same changes.
    let replay: Vec<_> = api
        .watch(&WatchParams::default().disable_bookmarks(), &rv)
        .await
        .unwrap()
        .take(3)
        .try_collect()
        .await
        .unwrap();
    assert!(matches!(replay[2], WatchEvent::Deleted(_)));

    // An expired resourceVersion is answered with an ERROR event carrying 410.
    server.compact();
    let mut expired = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let event = tokio::time::timeout(Duration::from_secs(5), expired.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(event, WatchEvent::Error(ref e) if e.code == 410),
        "{event:?}"
    );
}

/// Runs kube-rs's watcher in a task (so it keeps watching between reads), forwarding each
/// event as a line such as "InitApply shop/a".
fn spawn_watcher(api: Api<DynamicObject>, config: watcher::Config) -> WatcherEvents {
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut stream = watcher(api, config).boxed();
        while let Some(event) = stream.next().await {
            let line = match event {
                Ok(watcher::Event::Init) => "Init".into(),
                Ok(watcher::Event::InitApply(o)) => format!("InitApply {}", name_of(&o)),
                Ok(watcher::Event::InitDone) => "InitDone".into(),
                Ok(watcher::Event::Apply(o)) => format!("Apply {}", name_of(&o)),
                Ok(watcher::Event::Delete(o)) => format!("Delete {}", name_of(&o)),
                Err(error) => format!("Error {error}"),
            };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    WatcherEvents {
        receiver,
        task,
        events: Vec::new(),
    }
}

struct WatcherEvents {
    receiver: tokio::sync::mpsc::UnboundedReceiver<String>,
    task: tokio::task::JoinHandle<()>,
    events: Vec<String>,
}

impl Drop for WatcherEvents {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WatcherEvents {
    /// Collects events until `until` holds for all collected so far, for at most 10 s.
    async fn until(&mut self, until: impl Fn(&[String]) -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !until(&self.events) {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(remaining, self.receiver.recv()).await {
                Ok(Some(line)) => self.events.push(line),
                Ok(None) | Err(_) => return false,
            }
        }
        true
    }
}

fn ends_with_init_done(events: &[String]) -> bool {
    events.last().is_some_and(|l| l == "InitDone")
}

#[tokio::test]
async fn kube_watcher_lists_pages_then_watches() {
    let server = ApiServer::start().await;
    for i in 0..7 {
        server
            .create(route("shop", &format!("r{i}"), "a.example.com"))
            .unwrap();
    }
    let client = server.client().await;
    let api: Api<DynamicObject> = Api::all_with(client, &route_resource("v1"));
    let mut watch = spawn_watcher(api, watcher::Config::default().page_size(3));
    assert!(watch.until(ends_with_init_done).await, "{:?}", watch.events);
    assert_eq!(watch.events.len(), 9);
    assert_eq!(watch.events[0], "Init");
    assert!(eventually(Duration::from_secs(5), || server.open_watches() == 1).await);
    let lists: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("GET /apis/gateway.networking.k8s.io/v1/httproutes?"))
        .collect();
    assert_eq!(lists.len(), 4, "three pages of 3 then the watch: {lists:?}");
    assert!(lists[0].contains("limit=3"));
    assert!(lists[3].contains("watch=true") && lists[3].contains("allowWatchBookmarks=true"));

    server
        .create(route("shop", "new", "b.example.com"))
        .unwrap();
    server.delete("HTTPRoute", "shop", "r0").unwrap();
    assert!(watch.until(|e| e.len() >= 11).await, "{:?}", watch.events);
    assert_eq!(watch.events[9..], ["Apply shop/new", "Delete shop/r0"]);
}

#[tokio::test]
async fn dropped_watch_resumes_without_relist_while_history_lasts() {
    let server = ApiServer::start().await;
    server.create(route("shop", "a", "a.example.com")).unwrap();
    let client = server.client().await;
    let api: Api<DynamicObject> = Api::all_with(client, &route_resource("v1"));
    let mut watch = spawn_watcher(api, watcher::Config::default());
    assert!(watch.until(ends_with_init_done).await);
    assert!(eventually(Duration::from_secs(5), || server.open_watches() == 1).await);

    // Break the stream and make the next two watch attempts fail.
    server.fail_next_matching(2, 500, Some("watch=true"));
    server.drop_watches();
    server.create(route("shop", "b", "b.example.com")).unwrap();
    server.delete("HTTPRoute", "shop", "a").unwrap();
    assert!(
        watch
            .until(|e| e.iter().any(|l| l == "Delete shop/a"))
            .await,
        "{:?}",
        watch.events
    );
    let events = &watch.events;
    let after_drop = &events[3..];
    assert!(after_drop.iter().any(|l| l == "Apply shop/b"), "{events:?}");
    assert!(
        !after_drop.iter().any(|l| l == "Init"),
        "resumed from its resourceVersion, no relist: {events:?}"
    );
    assert!(
        after_drop.iter().any(|l| l.starts_with("Error")),
        "the dropped stream surfaced as an error: {events:?}"
    );
}

#[tokio::test]
async fn expired_history_forces_a_relist() {
    let server = ApiServer::builder().bookmark_interval(None).start().await;
    server.create(route("shop", "a", "a.example.com")).unwrap();
    server.create(route("shop", "b", "b.example.com")).unwrap();
    let client = server.client().await;
    let api: Api<DynamicObject> = Api::all_with(client, &route_resource("v1"));
    let mut watch = spawn_watcher(api, watcher::Config::default());
    assert!(watch.until(ends_with_init_done).await);
    assert!(eventually(Duration::from_secs(5), || server.open_watches() == 1).await);

    // Restart with a fresh watch cache: the watcher's resourceVersion is now too old.
    server.restart(Duration::from_millis(100), true).await;
    server.delete("HTTPRoute", "shop", "a").unwrap();
    server.create(route("shop", "c", "c.example.com")).unwrap();
    server.compact();
    let done = watch.until(|e| e.len() > 4 && ends_with_init_done(e)).await;
    assert!(done, "{:?}", watch.events);
    let events = &watch.events;
    let after = &events[4..];
    assert!(
        after
            .iter()
            .any(|l| l.contains("too old resource version") && l.contains("Expired")),
        "410 surfaced: {events:?}"
    );
    let relist_start = after.iter().position(|l| l == "Init").expect("relist");
    let relisted: Vec<&String> = after[relist_start..]
        .iter()
        .filter(|l| l.starts_with("InitApply"))
        .collect();
    assert_eq!(relisted, ["InitApply shop/b", "InitApply shop/c"]);
}

#[tokio::test]
async fn injected_errors_and_delays_are_answered() {
    let server = ApiServer::start().await;
    let client = server.client().await;
    let api: Api<DynamicObject> = Api::all_with(client, &route_resource("v1"));

    server.fail_next(1, 500);
    let err = api.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 500),
        "{err:?}"
    );
    assert!(api.list(&ListParams::default()).await.is_ok());

    // 503 is retried by kube-rs's client on its own: the caller sees success.
    server.clear_requests();
    server.fail_next(2, 503);
    assert!(api.list(&ListParams::default()).await.is_ok());
    assert_eq!(server.requests().len(), 3);

    server.set_delay(Duration::from_millis(300));
    let start = Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(300));
    server.set_delay(Duration::ZERO);
}

#[tokio::test]
async fn restart_cuts_connections_and_keeps_state() {
    let server = ApiServer::start().await;
    server.create(route("shop", "a", "a.example.com")).unwrap();
    let client = server.client().await;
    let api: Api<DynamicObject> = Api::all_with(client, &route_resource("v1"));
    let mut stream = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(first, WatchEvent::Added(_)));

    let restart = server.restart(Duration::from_millis(300), false);
    let probe = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        tokio::net::TcpStream::connect(server.addr()).await
    };
    let ((), refused) = tokio::join!(restart, probe);
    assert!(refused.is_err(), "nothing listens during the downtime");
    // The open watch was cut: the stream ends (possibly after an error).
    let rest: Vec<_> = tokio::time::timeout(Duration::from_secs(5), stream.collect::<Vec<_>>())
        .await
        .unwrap();
    assert!(rest.iter().all(|e| !matches!(e, Ok(WatchEvent::Added(_)))));
    let after = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        after.items.iter().map(name_of).collect::<Vec<_>>(),
        ["shop/a"]
    );
}

#[tokio::test]
async fn lease_get_create_replace_with_conflicts() {
    let server = ApiServer::start().await;
    let client = server.client().await;
    let leases: Api<Lease> = Api::namespaced(client, "gateway-dns");

    let err = leases.get("leader").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );
    assert!(leases.get_opt("leader").await.unwrap().is_none());

    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "leader", "namespace": "gateway-dns"},
        "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15},
    }))
    .unwrap();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let err = leases
        .create(&PostParams::default(), &lease)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err:?}"
    );

    let mut renewed = created.clone();
    renewed.spec.as_mut().unwrap().lease_transitions = Some(1);
    let renewed = leases
        .replace("leader", &PostParams::default(), &renewed)
        .await
        .unwrap();
    assert_ne!(
        renewed.metadata.resource_version,
        created.metadata.resource_version
    );

    // Writing with the resourceVersion read before someone else's write is a conflict.
    let mut stale = created.clone();
    stale.spec.as_mut().unwrap().holder_identity = Some("pod-b".into());
    let err = leases
        .replace("leader", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{err:?}"
    );
    let current = leases.get("leader").await.unwrap();
    assert_eq!(
        current.spec.unwrap().holder_identity.as_deref(),
        Some("pod-a")
    );
}
