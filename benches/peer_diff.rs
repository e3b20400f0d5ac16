//! Behaviour side by side with real external-dns: each scenario is applied to a fresh control
//! plane where gateway-dns (`serve --provider rfc2136`) and external-dns (`--source
//! gateway-httproute,gateway-grpcroute,gateway-tlsroute --provider rfc2136 --registry txt
//! --events`) each write their own BIND zone. At each checkpoint both zones are read by AXFR and
//! compared; every difference is classified by the table below — a rule of gateway-dns's design,
//! or a bug — and the result is printed and written to `docs/compared-with-external-dns.md`.
//!
//! A benchmark target rather than a test: it needs the real `gateway-dns` binary
//! (`CARGO_BIN_EXE_gateway-dns`) and the test support (control plane, BIND, external-dns), it
//! takes minutes, and its product is a document. It exits 1 when a difference has no
//! classification or a classification matches no difference, so the table cannot go stale;
//! `scripts/test.sh` runs it that way (`cargo test --bench peer_diff -- --no-write`).
//!
//! Needs `GATEWAY_DNS_CONTROL_PLANE` (tests/control-plane/build.sh) and `GATEWAY_DNS_PEER`
//! (tests/peer/build.sh). Run: `cargo bench --bench peer_diff [-- SCENARIO...]`
//! (`--no-write` prints without writing the document).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use support::bind::Bind;
use support::cluster::{ControlPlane, Serve, repo_root};
use support::extdns::{self, ExternalDns};

const SETTLE_LIMIT: Duration = Duration::from_secs(60);
const OURS: &str = "gateway-dns";
const THEIRS: &str = "external-dns";

// ---------------------------------------------------------------------------------------------
// The rules of gateway-dns's design that make it differ from external-dns on purpose.

const RULE_CONFLICT: &str = "Conflict: a name claimed through Gateways whose addresses differ is \
    published for one of them only (the oldest route's claim), never as the union of their \
    addresses.";
const RULE_INHERITED_WILDCARD: &str = "Names: a route without hostnames does not publish the \
    wildcard it inherits from its listener unless `--allow-inherited-wildcards` is set.";

const RULE_SPEC_ATTACHMENT: &str = "Attachment: with `--attachment spec` (the default) \
    attachment is predicted from spec, as the webhook must judge a route before any controller \
    wrote a status; a ListenerSet its Gateway admits counts until its controller refuses it \
    (`Accepted=False`). `--attachment status` waits for `Accepted=True` on the ListenerSet and \
    on each of its listeners, as external-dns does.";
const RULE_CONTROLLER: &str = "Scope: a Gateway or ListenerSet whose `controller` annotation \
    names another DNS controller is not managed, as for routes (external-dns's main branch; \
    v0.22 reads the annotation on routes only).";
const RULE_ADDRESS_LOSS_GRACE: &str = "Records: when a Gateway's addresses go empty (a load \
    balancer re-provisioned, a controller restarting), its names keep their records and their \
    claim for `--address-loss-grace` (default 10m), with a GatewayHasNoAddress warning; only \
    after it are they removed. external-dns removes them at once.";

/// Ownership records that differ only in the route they name (`external-dns/resource=`): several
/// routes publish the same record, and each tool names one of them.
const RESOURCE_VERDICT: Verdict = Verdict::ByDesign(
    "Ownership: when several routes publish the same record, its ownership record names the \
     oldest route's claim; external-dns names whichever endpoint its plan kept, which varies \
     from run to run.",
);

/// Every record published without a `ttl` annotation: external-dns's RFC 2136 provider writes
/// TTL 0 (its `--rfc2136-min-ttl` default), gateway-dns its default TTL.
const TTL_VERDICT: Verdict = Verdict::ByDesign(
    "Records: a record gateway-dns creates without a `ttl` annotation gets its default TTL, \
     which resolvers may cache, rather than TTL 0; a record that exists already keeps its TTL \
     unless an annotation sets one, so taking over external-dns's records rewrites none of them \
     for their TTL.",
);

enum Verdict {
    ByDesign(&'static str),
    /// A difference that is gateway-dns's bug, until it is fixed (none is known now).
    #[allow(dead_code)]
    Bug(&'static str),
}

/// A known difference: scenario, checkpoint, record name and type (type `TXT` for ownership
/// records), and why.
struct Known {
    scenario: &'static str,
    checkpoint: &'static str,
    name: &'static str,
    rtype: &'static str,
    verdict: Verdict,
}

const KNOWN: &[Known] = &[
    Known {
        scenario: "examples",
        checkpoint: "applied",
        name: "b.example.com",
        rtype: "A",
        verdict: Verdict::ByDesign(RULE_CONFLICT),
    },
    Known {
        scenario: "seed-story",
        checkpoint: "applied",
        name: "app.example.com",
        rtype: "A",
        verdict: Verdict::ByDesign(RULE_CONFLICT),
    },
    Known {
        scenario: "wildcard-listener",
        checkpoint: "applied",
        name: "*.example.com",
        rtype: "A",
        verdict: Verdict::ByDesign(RULE_INHERITED_WILDCARD),
    },
    Known {
        scenario: "listenerset",
        checkpoint: "applied",
        name: "app.pending.example.com",
        rtype: "A",
        verdict: Verdict::ByDesign(RULE_SPEC_ATTACHMENT),
    },
    Known {
        scenario: "annotations",
        checkpoint: "applied",
        name: "elsewhere.example.com",
        rtype: "A",
        verdict: Verdict::ByDesign(RULE_CONTROLLER),
    },
    Known {
        scenario: "address-lost",
        checkpoint: "address lost",
        name: "web.example.com",
        rtype: "A",
        verdict: Verdict::ByDesign(RULE_ADDRESS_LOSS_GRACE),
    },
    Known {
        scenario: "address-lost",
        checkpoint: "address lost",
        name: "web.example.com",
        rtype: "AAAA",
        verdict: Verdict::ByDesign(RULE_ADDRESS_LOSS_GRACE),
    },
    Known {
        scenario: "address-lost",
        checkpoint: "address lost",
        name: "api.example.com",
        rtype: "A",
        verdict: Verdict::ByDesign(RULE_ADDRESS_LOSS_GRACE),
    },
    Known {
        scenario: "address-lost",
        checkpoint: "address lost",
        name: "api.example.com",
        rtype: "AAAA",
        verdict: Verdict::ByDesign(RULE_ADDRESS_LOSS_GRACE),
    },
];

// ---------------------------------------------------------------------------------------------
// Scenarios.

enum Step {
    /// `kubectl apply` of YAML.
    Apply(String),
    /// The test Gateway controller gives `ns/name` these addresses (none: it lost them).
    Address(&'static str, &'static [&'static str]),
    /// The test Gateway controller accepts every route on every parent it references.
    AcceptRoutes,
    /// The test Gateway controller accepts ListenerSet `ns/name` and its listeners.
    AcceptListenerSet(&'static str),
    /// Both settle; both zones are compared under this label.
    Checkpoint(&'static str),
}

struct Scenario {
    name: &'static str,
    about: &'static str,
    steps: Vec<Step>,
}

fn file(path: &str) -> String {
    let path = repo_root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn namespaces(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n---\n"))
        .collect()
}

fn gateway(name: &str, listeners: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: {name}\n  \
         namespace: infra\nspec:\n  gatewayClassName: example\n{extra_spec}  listeners:\n{listeners}---\n"
    )
}

fn listener(name: &str, protocol: &str, port: u16, hostname: Option<&str>) -> String {
    let hostname = hostname.map_or(String::new(), |h| format!("    hostname: \"{h}\"\n"));
    let tls = if protocol == "TLS" {
        "    tls:\n      mode: Passthrough\n"
    } else {
        ""
    };
    format!(
        "  - name: {name}\n    protocol: {protocol}\n    port: {port}\n{hostname}{tls}    \
         allowedRoutes:\n      namespaces:\n        from: All\n"
    )
}

/// A route of `kind` in `apps` on parent `parent` (`Kind/ns/name`), with hostnames and
/// annotations.
fn route(
    kind: &str,
    name: &str,
    parent: &str,
    hostnames: &[&str],
    annotations: &[(&str, &str)],
) -> String {
    let mut parts = parent.splitn(3, '/');
    let (parent_kind, parent_ns, parent_name) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let mut yaml = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\n  \
         namespace: apps\n"
    );
    if !annotations.is_empty() {
        yaml.push_str("  annotations:\n");
        for (key, value) in annotations {
            let _ = writeln!(yaml, "    {key}: \"{value}\"");
        }
    }
    let _ = write!(
        yaml,
        "spec:\n  parentRefs:\n  - kind: {parent_kind}\n    name: {parent_name}\n    namespace: \
         {parent_ns}\n"
    );
    if !hostnames.is_empty() {
        yaml.push_str("  hostnames:\n");
        for hostname in hostnames {
            let _ = writeln!(yaml, "  - \"{hostname}\"");
        }
    }
    // TLSRoute requires rules; every kind accepts this one.
    let _ = write!(
        yaml,
        "  rules:\n  - backendRefs:\n    - name: {name}\n      port: 8080\n---\n"
    );
    yaml
}

fn scenarios() -> Vec<Scenario> {
    use Step::*;
    let public = listener("https", "HTTPS", 443, Some("*.example.com"));
    vec![
        Scenario {
            name: "examples",
            about: "The README's example cluster (`examples/cluster`): three Gateways; `a1` and \
                    `a2` share a.example.com on one Gateway, `b1` and `b2` claim b.example.com \
                    through two Gateways with different addresses, `d1` asks for a name outside \
                    its listener's hostname.",
            steps: vec![
                Apply(file("examples/cluster/gateways.yaml")),
                Address("infra/gw1", &["203.0.113.10"]),
                Address("infra/gw2", &["203.0.113.20"]),
                Address("infra/gw3", &["203.0.113.30"]),
                Apply(file("examples/cluster/routes.yaml")),
                AcceptRoutes,
                Checkpoint("applied"),
            ],
        },
        Scenario {
            name: "seed-story",
            about: "The story gateway-dns started from (`tests/fixtures/cluster/seed`), without \
                    the webhook: team A publishes app.example.com on the public Gateway, team B \
                    claims it on the internal one, and a third route has one hostname outside \
                    its listener.",
            steps: vec![
                Apply(file("tests/fixtures/cluster/seed/gateways.yaml")),
                Address("infra/public", &["203.0.113.10"]),
                Address("infra/internal", &["198.51.100.20"]),
                Apply(file("tests/fixtures/cluster/seed/team-a.yaml")),
                Apply(file("tests/fixtures/cluster/seed/team-b.yaml")),
                Apply(file("tests/fixtures/cluster/seed/outside-listener.yaml")),
                AcceptRoutes,
                Checkpoint("applied"),
            ],
        },
        Scenario {
            name: "wildcard-listener",
            about: "A listener for `*.example.com`: a route without hostnames (inherits the \
                    wildcard), a route for a wildcard under it, and one two labels deep.",
            steps: vec![
                Apply(namespaces(&["infra", "apps"]) + &gateway("public", &public, "")),
                Address("infra/public", &["203.0.113.10"]),
                Apply(
                    route("HTTPRoute", "hostless", "Gateway/infra/public", &[], &[])
                        + &route(
                            "HTTPRoute",
                            "star",
                            "Gateway/infra/public",
                            &["*.apps.example.com"],
                            &[],
                        )
                        + &route(
                            "HTTPRoute",
                            "deep",
                            "Gateway/infra/public",
                            &["a.b.example.com"],
                            &[],
                        ),
                ),
                AcceptRoutes,
                Checkpoint("applied"),
            ],
        },
        Scenario {
            name: "listenerset",
            about: "ListenerSets on a Gateway that admits them from every namespace: one the \
                    Gateway controller accepted, one it has not (yet), and one on a Gateway \
                    that admits none.",
            steps: vec![
                Apply(
                    namespaces(&["infra", "apps"])
                        + &gateway(
                            "shared",
                            &public,
                            "  allowedListeners:\n    namespaces:\n      from: All\n",
                        )
                        + &gateway("closed", &listener("http", "HTTP", 80, None), "")
                        + &listener_set("team", "shared", "*.team.example.com")
                        + &listener_set("pending", "shared", "*.pending.example.com")
                        + &listener_set("refused", "closed", "*.refused.example.com"),
                ),
                Address("infra/shared", &["203.0.113.10"]),
                Address("infra/closed", &["203.0.113.40"]),
                AcceptListenerSet("apps/team"),
                Apply(
                    route(
                        "HTTPRoute",
                        "team",
                        "ListenerSet/apps/team",
                        &["app.team.example.com"],
                        &[],
                    ) + &route(
                        "HTTPRoute",
                        "pending",
                        "ListenerSet/apps/pending",
                        &["app.pending.example.com"],
                        &[],
                    ) + &route(
                        "HTTPRoute",
                        "refused",
                        "ListenerSet/apps/refused",
                        &["app.refused.example.com"],
                        &[],
                    ),
                ),
                AcceptRoutes,
                Checkpoint("applied"),
            ],
        },
        Scenario {
            name: "shared-address",
            about: "Two Gateways with one address: a name claimed through both, and a name on \
                    each.",
            steps: vec![
                Apply(
                    namespaces(&["infra", "apps"])
                        + &gateway("east", &public, "")
                        + &gateway("west", &public, ""),
                ),
                Address("infra/east", &["203.0.113.50"]),
                Address("infra/west", &["203.0.113.50"]),
                Apply(
                    route(
                        "HTTPRoute",
                        "east",
                        "Gateway/infra/east",
                        &["shared.example.com", "east.example.com"],
                        &[],
                    ) + &route(
                        "HTTPRoute",
                        "west",
                        "Gateway/infra/west",
                        &["shared.example.com", "west.example.com"],
                        &[],
                    ),
                ),
                AcceptRoutes,
                Checkpoint("applied"),
            ],
        },
        Scenario {
            name: "address-lost",
            about: "A Gateway publishes two names, then its controller loses the address \
                    (status.addresses emptied, Programmed=False); gateway-dns runs with its \
                    default address-loss grace (10m), which outlasts the checkpoint.",
            steps: vec![
                Apply(namespaces(&["infra", "apps"]) + &gateway("public", &public, "")),
                Address("infra/public", &["203.0.113.10", "2001:db8::10"]),
                Apply(route(
                    "HTTPRoute",
                    "web",
                    "Gateway/infra/public",
                    &["web.example.com", "api.example.com"],
                    &[],
                )),
                AcceptRoutes,
                Checkpoint("published"),
                Address("infra/public", &[]),
                Checkpoint("address lost"),
            ],
        },
        Scenario {
            name: "annotations",
            about: "external-dns's annotations: an extra hostname, `gateway-hostname-source` \
                    (annotation-only, defined-hosts-only), a TTL, a route for another \
                    controller, a Gateway whose `target` replaces its address, and a Gateway \
                    annotated for another controller.",
            steps: vec![
                Apply(
                    namespaces(&["infra", "apps"])
                        + &gateway("public", &public, "")
                        + &annotated_gateway(
                            "proxied",
                            &public,
                            "external-dns.kubernetes.io/target",
                            "lb.example.net",
                        )
                        + &annotated_gateway(
                            "elsewhere",
                            &public,
                            "external-dns.kubernetes.io/controller",
                            "someone-else",
                        ),
                ),
                Address("infra/public", &["203.0.113.10"]),
                Address("infra/proxied", &["203.0.113.60"]),
                Address("infra/elsewhere", &["203.0.113.80"]),
                Apply(
                    route(
                        "HTTPRoute",
                        "extra",
                        "Gateway/infra/public",
                        &["spec.example.com"],
                        &[(HOSTNAME, "extra.example.com")],
                    ) + &route(
                        "HTTPRoute",
                        "annotation-only",
                        "Gateway/infra/public",
                        &["ao-spec.example.com"],
                        &[
                            (HOSTNAME, "ao-annotation.example.com"),
                            (SOURCE, "annotation-only"),
                        ],
                    ) + &route(
                        "HTTPRoute",
                        "defined-hosts-only",
                        "Gateway/infra/public",
                        &["dho-spec.example.com"],
                        &[
                            (HOSTNAME, "dho-annotation.example.com"),
                            (SOURCE, "defined-hosts-only"),
                        ],
                    ) + &route(
                        "HTTPRoute",
                        "ttl",
                        "Gateway/infra/public",
                        &["ttl.example.com"],
                        &[("external-dns.kubernetes.io/ttl", "120")],
                    ) + &route(
                        "HTTPRoute",
                        "other-controller",
                        "Gateway/infra/public",
                        &["other.example.com"],
                        &[("external-dns.kubernetes.io/controller", "someone-else")],
                    ) + &route(
                        "HTTPRoute",
                        "proxied",
                        "Gateway/infra/proxied",
                        &["proxied.example.com"],
                        &[],
                    ) + &route(
                        "HTTPRoute",
                        "on-elsewhere",
                        "Gateway/infra/elsewhere",
                        &["elsewhere.example.com"],
                        &[],
                    ),
                ),
                AcceptRoutes,
                Checkpoint("applied"),
            ],
        },
        Scenario {
            name: "grpc-tls",
            about: "A GRPCRoute on an HTTPS listener and a TLSRoute on a TLS passthrough \
                    listener, and a TLSRoute whose hostname only the HTTPS listener serves (wrong \
                    protocol).",
            steps: vec![
                Apply(
                    namespaces(&["infra", "apps"])
                        + &gateway(
                            "edge",
                            &(public.clone()
                                + &listener("tls", "TLS", 8443, Some("*.tls.example.com"))),
                            "",
                        ),
                ),
                Address("infra/edge", &["203.0.113.70"]),
                Apply(
                    route(
                        "GRPCRoute",
                        "grpc",
                        "Gateway/infra/edge",
                        &["grpc.example.com"],
                        &[],
                    ) + &route(
                        "TLSRoute",
                        "tls",
                        "Gateway/infra/edge",
                        &["db.tls.example.com"],
                        &[],
                    ) + &route(
                        "TLSRoute",
                        "tls-on-https",
                        "Gateway/infra/edge",
                        &["wrong.example.com"],
                        &[],
                    ),
                ),
                AcceptRoutes,
                Checkpoint("applied"),
            ],
        },
    ]
}

const HOSTNAME: &str = "external-dns.kubernetes.io/hostname";
const SOURCE: &str = "external-dns.kubernetes.io/gateway-hostname-source";

fn annotated_gateway(name: &str, listeners: &str, key: &str, value: &str) -> String {
    gateway(name, listeners, "").replacen(
        "  namespace: infra\n",
        &format!("  namespace: infra\n  annotations:\n    {key}: \"{value}\"\n"),
        1,
    )
}

fn listener_set(name: &str, gateway: &str, hostname: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: ListenerSet\nmetadata:\n  name: {name}\n  \
         namespace: apps\nspec:\n  parentRef:\n    name: {gateway}\n    namespace: infra\n  \
         listeners:\n  - name: https\n    protocol: HTTPS\n    port: 443\n    hostname: \
         \"{hostname}\"\n    allowedRoutes:\n      namespaces:\n        from: Same\n---\n"
    )
}

// ---------------------------------------------------------------------------------------------
// Running a scenario.

/// Records of one zone: (name, type) → (TTL, sorted data), apex left out.
type Zone = BTreeMap<(String, String), (u32, Vec<String>)>;

fn read_zone(bind: &Bind, owner: &str) -> Zone {
    let apex_host = format!("ns1.{}", bind.zone);
    let mut zone = Zone::new();
    for rr in bind.axfr() {
        if rr.name == bind.zone || rr.name == apex_host {
            continue;
        }
        // Ownership records differ by owner id by construction: compare them without it.
        let data = rr.data.trim_matches('"').replace(
            &format!("external-dns/owner={owner}"),
            "external-dns/owner=…",
        );
        let entry = zone
            .entry((rr.name, rr.rtype))
            .or_insert((rr.ttl, Vec::new()));
        entry.1.push(data);
    }
    for (_, data) in zone.values_mut() {
        data.sort();
        data.dedup();
    }
    zone
}

struct Checkpoint {
    label: &'static str,
    ours: Zone,
    theirs: Zone,
}

struct Outcome {
    scenario: &'static Scenario,
    checkpoints: Vec<Checkpoint>,
}

fn run(scenario: &'static Scenario, runtime: &tokio::runtime::Runtime) -> Outcome {
    let cluster = ControlPlane::start();
    let ours_bind = Bind::start("example.com", "");
    let theirs_bind = Bind::start("example.com", "");
    cluster.install_gateway_dns_rbac();
    let identity = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    let mut args = ours_bind.serve_args();
    // The zones are compared record by record: external-dns writes no heartbeat.
    args.extend(
        [
            "--txt-owner-id",
            OURS,
            "--interval",
            "2s",
            "--owner-heartbeat-interval=0",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let serve = Serve::start_with_env(&identity, OURS, &args, &ours_bind.serve_env());
    let peer_identity = extdns::install_rbac(&cluster);
    let mut peer = ExternalDns::start(
        &peer_identity,
        &theirs_bind,
        &extdns::Config::gateway_routes(THEIRS),
    );
    runtime.block_on(serve.wait_ready(SETTLE_LIMIT));

    let mut checkpoints = Vec::new();
    for step in &scenario.steps {
        match step {
            Step::Apply(yaml) => {
                cluster.apply(yaml, &[]).ok();
            }
            Step::Address(gateway, addresses) => cluster.gateway_address(gateway, addresses),
            Step::AcceptRoutes => extdns::accept_all_routes(&cluster),
            Step::AcceptListenerSet(name) => extdns::accept_listener_set(&cluster, name),
            Step::Checkpoint(label) => {
                // Each has completed a pass that began after the last change.
                runtime.block_on(serve.wait_synced(SETTLE_LIMIT));
                peer.wait_synced(SETTLE_LIMIT);
                checkpoints.push(Checkpoint {
                    label,
                    ours: read_zone(&ours_bind, OURS),
                    theirs: read_zone(&theirs_bind, THEIRS),
                });
            }
        }
    }
    serve.assert_running();
    peer.assert_running();
    Outcome {
        scenario,
        checkpoints,
    }
}

// ---------------------------------------------------------------------------------------------
// Comparing and reporting.

/// How one (name, type) compares.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Compared {
    Same,
    /// The same data, another TTL.
    TtlOnly,
    /// Ownership records that name another route of the same record (any TTL).
    ResourceOnly,
    /// Data differs, or only one has the record.
    Records,
}

struct Row {
    name: String,
    rtype: String,
    ours: Option<(u32, Vec<String>)>,
    theirs: Option<(u32, Vec<String>)>,
    compared: Compared,
    /// For a `Records` difference: its classification, if the table has one.
    known: Option<&'static Known>,
    /// For an ownership TXT record whose owned record also differs: that record's name and type.
    follows: Option<(String, String)>,
}

fn show(entry: &Option<(u32, Vec<String>)>) -> String {
    match entry {
        None => "—".into(),
        Some((ttl, data)) => format!("{} (TTL {ttl})", data.join(", ")),
    }
}

/// The record an ownership TXT record is about: external-dns names it `<type>-<name>`.
/// Ownership values with their `external-dns/resource=` part left out.
fn without_resource(data: &[String]) -> Vec<String> {
    data.iter()
        .map(|value| {
            value
                .split(',')
                .filter(|part| !part.starts_with("external-dns/resource="))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect()
}

fn owned_record(name: &str, data: &[String]) -> Option<(String, String)> {
    if !data.iter().all(|d| d.starts_with("heritage=external-dns,")) {
        return None;
    }
    let (prefix, owned) = name.split_once('-')?;
    let rtype = prefix.to_ascii_uppercase();
    ["A", "AAAA", "CNAME"]
        .contains(&rtype.as_str())
        .then(|| (owned.to_string(), rtype))
}

fn rows(scenario: &str, checkpoint: &Checkpoint) -> Vec<Row> {
    let keys: BTreeSet<&(String, String)> = checkpoint
        .ours
        .keys()
        .chain(checkpoint.theirs.keys())
        .collect();
    let mut rows: Vec<Row> = keys
        .into_iter()
        .map(|key| {
            let (ours, theirs) = (checkpoint.ours.get(key), checkpoint.theirs.get(key));
            let compared = match (ours, theirs) {
                (Some(o), Some(t)) if o == t => Compared::Same,
                (Some(o), Some(t)) if o.1 == t.1 => Compared::TtlOnly,
                (Some(o), Some(t))
                    if key.1 == "TXT" && without_resource(&o.1) == without_resource(&t.1) =>
                {
                    Compared::ResourceOnly
                }
                _ => Compared::Records,
            };
            let known = (compared == Compared::Records)
                .then(|| {
                    KNOWN.iter().find(|k| {
                        k.scenario == scenario
                            && k.checkpoint == checkpoint.label
                            && k.name == key.0
                            && k.rtype == key.1
                    })
                })
                .flatten();
            Row {
                name: key.0.clone(),
                rtype: key.1.clone(),
                ours: ours.cloned(),
                theirs: theirs.cloned(),
                compared,
                known,
                follows: None,
            }
        })
        .collect();
    // An ownership record differs whenever the record it owns does; it is that difference.
    let differing: BTreeSet<(String, String)> = rows
        .iter()
        .filter(|r| r.compared == Compared::Records && r.rtype != "TXT")
        .map(|r| (r.name.clone(), r.rtype.clone()))
        .collect();
    for row in rows.iter_mut() {
        if row.compared != Compared::Records || row.rtype != "TXT" || row.known.is_some() {
            continue;
        }
        let data: Vec<String> = row
            .ours
            .iter()
            .chain(row.theirs.iter())
            .flat_map(|(_, d)| d.clone())
            .collect();
        if let Some(owned) = owned_record(&row.name, &data)
            && differing.contains(&owned)
        {
            row.follows = Some(owned);
        }
    }
    rows
}

fn verdict_text(verdict: &Verdict) -> String {
    match verdict {
        Verdict::ByDesign(rule) => format!("by design — {rule}"),
        Verdict::Bug(note) => format!("**bug** — {note}"),
    }
}

fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace('*', "\\*")
}

/// Differences of one kind counted together: records and the scenarios they occur in (TTL-only
/// differences by their pair of TTLs; ownership records that name another route).
#[derive(Default)]
struct DifferenceGroup {
    records: usize,
    scenarios: BTreeSet<&'static str>,
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let write = !args.iter().any(|a| a == "--no-write");
    let selected: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let all: &'static [Scenario] = Box::leak(scenarios().into_boxed_slice());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let mut outcomes = Vec::new();
    for scenario in all {
        if !selected.is_empty() && !selected.iter().any(|s| *s == scenario.name) {
            continue;
        }
        eprintln!("scenario {} …", scenario.name);
        outcomes.push(run(scenario, &runtime));
    }

    let mut summary = String::new();
    let mut details = String::new();
    let (mut by_design, mut bugs, mut unclassified) = (0, 0, 0);
    let mut matched: BTreeSet<(&str, &str, &str, &str)> = BTreeSet::new();
    let mut ttl_groups: BTreeMap<(u32, u32), DifferenceGroup> = BTreeMap::new();
    let mut resource_only = DifferenceGroup::default();
    for outcome in &outcomes {
        let scenario = outcome.scenario.name;
        let _ = writeln!(details, "### {scenario}\n\n{}\n", outcome.scenario.about);
        for checkpoint in &outcome.checkpoints {
            let _ = writeln!(
                details,
                "**{}**\n\n| name | type | gateway-dns | external-dns | |\n|---|---|---|---|---|",
                checkpoint.label
            );
            for row in rows(scenario, checkpoint) {
                let short = match (row.compared, row.known, &row.follows) {
                    (Compared::Same, ..) => "same".to_string(),
                    (Compared::TtlOnly, ..) => {
                        let pair = (row.ours.as_ref().unwrap().0, row.theirs.as_ref().unwrap().0);
                        let group = ttl_groups.entry(pair).or_default();
                        group.records += 1;
                        group.scenarios.insert(scenario);
                        "TTL only".to_string()
                    }
                    (Compared::ResourceOnly, ..) => {
                        resource_only.records += 1;
                        resource_only.scenarios.insert(scenario);
                        "ownership names another route".to_string()
                    }
                    (Compared::Records, _, Some((name, rtype))) => {
                        format!("ownership of {} {rtype}", escape(name))
                    }
                    (Compared::Records, Some(known), None) => {
                        matched.insert((known.scenario, known.checkpoint, known.name, known.rtype));
                        let _ = writeln!(
                            summary,
                            "| {scenario} ({}) | {} {} | {} | {} | {} |",
                            checkpoint.label,
                            escape(&row.name),
                            row.rtype,
                            escape(&show(&row.ours)),
                            escape(&show(&row.theirs)),
                            verdict_text(&known.verdict)
                        );
                        match known.verdict {
                            Verdict::ByDesign(_) => {
                                by_design += 1;
                                "by design".to_string()
                            }
                            Verdict::Bug(_) => {
                                bugs += 1;
                                "**bug**".to_string()
                            }
                        }
                    }
                    (Compared::Records, None, None) => {
                        unclassified += 1;
                        let _ = writeln!(
                            summary,
                            "| {scenario} ({}) | {} {} | {} | {} | **UNCLASSIFIED** |",
                            checkpoint.label,
                            escape(&row.name),
                            row.rtype,
                            escape(&show(&row.ours)),
                            escape(&show(&row.theirs)),
                        );
                        "**UNCLASSIFIED**".to_string()
                    }
                };
                let _ = writeln!(
                    details,
                    "| {} | {} | {} | {} | {short} |",
                    escape(&row.name),
                    row.rtype,
                    escape(&show(&row.ours)),
                    escape(&show(&row.theirs))
                );
            }
            details.push('\n');
        }
    }
    for ((ours, theirs), group) in &ttl_groups {
        by_design += 1;
        let _ = writeln!(
            summary,
            "| {} | TTL of {} records that no `ttl` annotation sets (ownership TXT included) | \
             {ours} | {theirs} | {} |",
            group
                .scenarios
                .iter()
                .copied()
                .collect::<Vec<_>>()
                .join(", "),
            group.records,
            verdict_text(&TTL_VERDICT)
        );
    }
    if resource_only.records > 0 {
        by_design += 1;
        let _ = writeln!(
            summary,
            "| {} | {} ownership records of a record several routes publish | one route | \
             another route | {} |",
            resource_only
                .scenarios
                .iter()
                .copied()
                .collect::<Vec<_>>()
                .join(", "),
            resource_only.records,
            verdict_text(&RESOURCE_VERDICT)
        );
    }
    let stale: Vec<&Known> = KNOWN
        .iter()
        .filter(|k| {
            outcomes.iter().any(|o| o.scenario.name == k.scenario)
                && !matched.contains(&(k.scenario, k.checkpoint, k.name, k.rtype))
        })
        .collect();

    let mut document = String::new();
    let _ = writeln!(
        document,
        "# gateway-dns compared with external-dns\n\n\
         <!-- Generated by `cargo bench --bench peer_diff` (scripts/benchmarks runs it); do not edit. -->\n\n\
         The same objects applied to one real kube-apiserver, read by gateway-dns (`serve \
         --provider rfc2136`) and by external-dns {version} (built from its Go module: \
         `--source=gateway-httproute --source=gateway-grpcroute --source=gateway-tlsroute \
         --gateway-listener-sets --provider=rfc2136 --registry=txt --events --policy=sync`), each \
         writing its own BIND zone `example.com`. A test Gateway controller writes what a real \
         one would: Gateway addresses, and `Accepted` status on routes and on the ListenerSets \
         it accepts (external-dns publishes only what that status accepts). No admission webhook \
         is registered, so both see every object — with gateway-dns's webhook the conflicting \
         routes below would be refused at `kubectl apply`. At each checkpoint both have \
         completed a pass that began after the last change; both zones are read by AXFR. \
         Ownership TXT records are compared with the owner id set aside; one that differs only \
         because the record it owns differs is that record's difference, listed once.\n",
        version = extdns::version()
    );
    let _ = writeln!(
        document,
        "## Differences\n\n{by_design} by design, {bugs} bug(s), {unclassified} unclassified.\n\n\
         | scenario (checkpoint) | record | gateway-dns | external-dns | classification |\n\
         |---|---|---|---|---|\n{summary}"
    );
    let _ = writeln!(document, "## Scenarios\n\n{details}");
    print!("{document}");
    for known in &stale {
        eprintln!(
            "classification matches no difference: {} ({}) {} {}",
            known.scenario, known.checkpoint, known.name, known.rtype
        );
    }
    if write && selected.is_empty() {
        let path = repo_root().join("docs/compared-with-external-dns.md");
        std::fs::write(&path, document.trim_end().to_string() + "\n").unwrap();
        eprintln!("wrote {}", path.display());
    }
    if unclassified > 0 || !stale.is_empty() {
        eprintln!(
            "{unclassified} unclassified difference(s), {} stale classification(s)",
            stale.len()
        );
        std::process::exit(1);
    }
}
