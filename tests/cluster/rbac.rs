//! `serve` runs as the ServiceAccount of `manifests/base` and that identity holds every
//! permission `serve` uses and nothing more: the API server itself answers each question
//! (`kubectl auth can-i` with impersonation), and a real `serve` on that identity gets no 403.

use std::time::Duration;

use crate::support::cluster::{ControlPlane, Serve};
use crate::support::extdns;

const SERVICE_ACCOUNT: &str = "system:serviceaccount:gateway-dns:gateway-dns";

const GATEWAY_API_KINDS: [&str; 7] = [
    "gateways",
    "listenersets",
    "httproutes",
    "grpcroutes",
    "tlsroutes",
    "tcproutes",
    "udproutes",
];

/// `kubectl auth can-i` as the ServiceAccount: true for "yes".
fn can(cluster: &ControlPlane, verb: &str, resource: &str, scope: &[&str]) -> bool {
    let mut args = vec!["auth", "can-i", verb, resource, "--as", SERVICE_ACCOUNT];
    args.extend_from_slice(scope);
    let run = cluster.kubectl(&args);
    match run.stdout.trim() {
        "yes" => true,
        "no" => false,
        _ => panic!("kubectl auth can-i {verb} {resource}: {run:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_as_the_manifests_service_account_with_least_privilege() {
    let cluster = ControlPlane::start();
    cluster.install_gateway_dns_rbac();
    let all = ["--all-namespaces"];
    let own = ["-n", "gateway-dns"];
    let other = ["-n", "default"];

    // What serve needs: read every kind it watches, cluster-wide; Events; its one Lease.
    for kind in GATEWAY_API_KINDS {
        let resource = format!("{kind}.gateway.networking.k8s.io");
        for verb in ["get", "list", "watch"] {
            assert!(can(&cluster, verb, &resource, &all), "{verb} {resource}");
        }
        // Never a write to what the Gateway controller and the app teams own.
        for verb in ["create", "update", "patch", "delete"] {
            assert!(!can(&cluster, verb, &resource, &all), "{verb} {resource}");
        }
        let status = format!("{resource}/status");
        assert!(!can(&cluster, "update", &status, &all), "update {status}");
        assert!(!can(&cluster, "patch", &status, &all), "patch {status}");
    }
    for verb in ["get", "list", "watch"] {
        assert!(can(&cluster, verb, "namespaces", &[]), "{verb} namespaces");
    }
    assert!(!can(&cluster, "update", "namespaces", &[]));
    assert!(can(&cluster, "create", "events.events.k8s.io", &other));
    assert!(can(&cluster, "create", "leases.coordination.k8s.io", &own));
    for verb in ["get", "update"] {
        assert!(can(
            &cluster,
            verb,
            "leases.coordination.k8s.io/gateway-dns",
            &own
        ));
        assert!(!can(
            &cluster,
            verb,
            "leases.coordination.k8s.io/someone-else",
            &own
        ));
    }
    assert!(!can(
        &cluster,
        "create",
        "leases.coordination.k8s.io",
        &other
    ));
    // --provider dnsendpoint: DNSEndpoint objects in its own namespace, nowhere else (the API
    // server answers only for a resource it serves).
    extdns::install_dnsendpoint_crd(&cluster);
    for verb in ["get", "list", "create", "patch", "delete"] {
        assert!(
            can(&cluster, verb, "dnsendpoints.externaldns.k8s.io", &own),
            "{verb} dnsendpoints"
        );
        assert!(
            !can(&cluster, verb, "dnsendpoints.externaldns.k8s.io", &other),
            "{verb} dnsendpoints in default"
        );
    }
    assert!(!can(
        &cluster,
        "delete",
        "leases.coordination.k8s.io/gateway-dns",
        &own
    ));

    // Nothing it does not need: no Secrets anywhere, not even in its own namespace.
    for verb in ["get", "list", "watch"] {
        assert!(!can(&cluster, verb, "secrets", &all), "{verb} secrets");
        assert!(
            !can(&cluster, verb, "secrets", &own),
            "{verb} secrets in gateway-dns"
        );
    }
    for (verb, resource) in [
        ("list", "configmaps"),
        ("list", "pods"),
        (
            "create",
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
        ),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
        ("create", "serviceaccounts/token"),
    ] {
        assert!(!can(&cluster, verb, resource, &all), "{verb} {resource}");
    }

    // The token serve uses is that ServiceAccount's, and the server refuses it what RBAC denies.
    let identity = cluster.service_account_kubeconfig("gateway-dns", "gateway-dns", None);
    let whoami = cluster.kubectl_as(
        &identity,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
        None,
    );
    assert_eq!(whoami.ok(), SERVICE_ACCOUNT);
    let secrets = cluster.kubectl_as(&identity, &["get", "secrets", "-A"], None);
    assert!(
        !secrets.success && secrets.stderr.contains("Forbidden"),
        "{secrets:?}"
    );
    let route = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  \
                 name: not-mine\n  namespace: default\nspec:\n  parentRefs:\n  - name: public\n";
    let write = cluster.kubectl_as(&identity, &["apply", "-f", "-"], Some(route));
    assert!(
        !write.success && write.stderr.contains("Forbidden"),
        "{write:?}"
    );

    // Everything serve does with that identity succeeds: it syncs every kind, takes its Lease
    // and publishes, without one refusal from the API server in its log.
    cluster
        .apply(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: infra\n---\napiVersion: \
         gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: public\n  namespace: \
         infra\nspec:\n  gatewayClassName: example\n  listeners:\n  - name: http\n    protocol: \
         HTTP\n    port: 80\n    allowedRoutes:\n      namespaces:\n        from: All\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: web\n  \
         namespace: infra\nspec:\n  parentRefs:\n  - name: public\n  hostnames:\n  - \
         rbac.example.com\n",
            &[],
        )
        .ok();
    cluster.gateway_address("infra/public", &["203.0.113.7"]);
    let serve = Serve::start(&identity, "rbac-test", &["--zone", "example.com"]);
    serve.wait_ready(Duration::from_secs(60)).await;
    serve
        .wait_answer(
            "rbac.example.com",
            "A",
            &["203.0.113.7"],
            Duration::from_secs(30),
        )
        .await;
    let holder = cluster
        .kubectl(&[
            "get",
            "lease",
            "gateway-dns",
            "-n",
            "gateway-dns",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
        .ok();
    assert_eq!(holder, "rbac-test");
    let log = serve.log().to_lowercase();
    assert!(
        !log.contains("forbidden") && !log.contains("\"code\":403"),
        "serve met a refusal:\n{}",
        serve.log_tail()
    );
}
