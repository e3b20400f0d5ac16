//! The chart's certificate Jobs against a real API server: the real `gateway-dns certs` with the
//! args the chart renders for them, on a token of their ServiceAccount bound to exactly the
//! chart's RBAC, makes the TLS Secret, keeps it on a rerun, renews it when asked, and copies its
//! CA into the chart's ValidatingWebhookConfiguration; the serving certificate verifies against
//! that CA for the Service's name. And the failures say what is missing.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use serde_json::Value;

use crate::support::cluster::{ControlPlane, GatewayApi, Options};
use crate::support::helm::{NAMESPACE, rendered};
use crate::support::install::{Doc, binary};

const SERVICE_ACCOUNT: &str = "gateway-dns-certgen";
const SECRET: &str = "gateway-dns-tls";
const WEBHOOK: &str = "gateway-dns";

fn chart_object<'a>(docs: &'a [Doc], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .map(|doc| &doc.value)
        .find(|value| value["kind"] == kind && value["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the chart renders no {kind} {name}"))
}

fn yaml_of(objects: &[&Value]) -> String {
    objects
        .iter()
        .map(|object| serde_yaml_ng::to_string(object).unwrap())
        .collect::<Vec<_>>()
        .join("---\n")
}

/// The args of one of the chart's certificate Jobs.
fn job_args(docs: &[Doc], job: &str) -> Vec<String> {
    chart_object(docs, "Job", job)["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|arg| arg.as_str().unwrap().to_string())
        .collect()
}

/// Runs the real binary as the Job would, with `kubeconfig` standing in for the pod's token.
fn certs(kubeconfig: &Path, args: &[String]) -> Output {
    Command::new(binary())
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "gateway-dns certs failed ({:?}): {}{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A failure with exit status 2; returns stderr.
fn refused(output: &Output) -> String {
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn get_json(cluster: &ControlPlane, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend(["-o", "json"]);
    serde_json::from_str(&cluster.kubectl(&all).ok()).unwrap()
}

fn decode(value: &Value) -> Vec<u8> {
    data_encoding::BASE64
        .decode(value.as_str().unwrap_or_default().as_bytes())
        .unwrap()
}

fn secret(cluster: &ControlPlane, name: &str) -> Value {
    get_json(cluster, &["secret", name, "-n", NAMESPACE])
}

fn ca_bundles(cluster: &ControlPlane) -> Vec<Vec<u8>> {
    get_json(cluster, &["validatingwebhookconfiguration", WEBHOOK])["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|webhook| decode(&webhook["clientConfig"]["caBundle"]))
        .collect()
}

/// Whether `cert_pem`'s leaf verifies against `ca_pem` for `host` now (chain, name, dates,
/// serverAuth), as a TLS client of the webhook would check it.
fn verifies(ca_pem: &[u8], cert_pem: &[u8], host: &str) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem) {
        roots
            .add(ca.map_err(|e| format!("{e:?}"))?)
            .map_err(|e| e.to_string())?;
    }
    let chain: Vec<CertificateDer> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{e:?}"))?;
    let verifier = WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| e.to_string())?;
    let name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
    verifier
        .verify_server_cert(&chain[0], &chain[1..], &name, &[], UnixTime::now())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn cluster_without_gateway_api() -> ControlPlane {
    let cluster = ControlPlane::start_with(&Options {
        gateway_api: GatewayApi::None,
        ..Options::default()
    });
    cluster.kubectl(&["create", "namespace", NAMESPACE]).ok();
    cluster
}

#[test]
fn chart_certificate_jobs_make_keep_and_patch_with_the_charts_rbac() {
    let cluster = cluster_without_gateway_api();
    let docs = rendered(&[], &[]);
    // The Jobs' RBAC, exactly as rendered, and the webhook configuration they patch.
    let rbac: Vec<&Value> = [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
    ]
    .iter()
    .map(|kind| chart_object(&docs, kind, SERVICE_ACCOUNT))
    .collect();
    cluster.apply(&yaml_of(&rbac), &[]).ok();
    let configuration = chart_object(&docs, "ValidatingWebhookConfiguration", WEBHOOK);
    cluster.apply(&yaml_of(&[configuration]), &[]).ok();
    let identity = cluster.service_account_kubeconfig(NAMESPACE, SERVICE_ACCOUNT, None);
    let create = job_args(&docs, "gateway-dns-certgen-create");
    let patch = job_args(&docs, "gateway-dns-certgen-patch");

    // Least privilege: its own Secret and webhook configuration only.
    let who = format!("system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}");
    for (verb, resource) in [
        ("get", "secrets/someone-else"),
        ("list", "secrets"),
        ("delete", "secrets/gateway-dns-tls"),
        (
            "update",
            "validatingwebhookconfigurations.admissionregistration.k8s.io/someone-else",
        ),
    ] {
        let run = cluster.kubectl(&[
            "auth", "can-i", verb, resource, "-n", NAMESPACE, "--as", &who,
        ]);
        assert_eq!(run.stdout.trim(), "no", "{verb} {resource}: {run:?}");
    }

    // Install: the create Job makes the Secret.
    let made = stdout(&certs(&identity, &create));
    assert!(
        made.contains("created Secret gateway-dns/gateway-dns-tls"),
        "{made}"
    );
    let first = secret(&cluster, SECRET);
    assert_eq!(first["type"], "kubernetes.io/tls");
    let data = &first["data"];
    let (ca, cert, key) = (
        decode(&data["ca.crt"]),
        decode(&data["tls.crt"]),
        decode(&data["tls.key"]),
    );
    assert!(!key.is_empty());
    verifies(&ca, &cert, "gateway-dns.gateway-dns.svc").unwrap();
    assert!(verifies(&ca, &cert, "gateway-dns.elsewhere.svc").is_err());

    // Upgrade: the pair is still good, so the Secret stays as it was, byte for byte.
    let kept = stdout(&certs(&identity, &create));
    assert!(
        kept.contains("kept Secret gateway-dns/gateway-dns-tls"),
        "{kept}"
    );
    let second = secret(&cluster, SECRET);
    assert_eq!(second["data"], first["data"]);
    assert_eq!(
        second["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );

    // What the API server refuses is said once, in its words.
    let other: Vec<String> = patch
        .iter()
        .map(|arg| match arg.as_str() {
            "--patch-webhook=gateway-dns" => "--patch-webhook=someone-else".to_string(),
            _ => arg.clone(),
        })
        .collect();
    let forbidden = refused(&certs(&identity, &other));
    assert!(
        forbidden.starts_with(
            "gateway-dns certs: cannot read ValidatingWebhookConfiguration someone-else: "
        ) && forbidden.trim_end().ends_with("(Forbidden)")
            && !forbidden.contains("Status {"),
        "{forbidden}"
    );

    // After install: the patch Job copies the CA into every webhook; a rerun changes nothing.
    let patched = stdout(&certs(&identity, &patch));
    assert!(
        patched.contains(
            "set the caBundle of 1 webhook(s) of ValidatingWebhookConfiguration gateway-dns"
        ),
        "{patched}"
    );
    assert_eq!(ca_bundles(&cluster), vec![ca.clone()]);
    let again = stdout(&certs(&identity, &patch));
    assert!(again.contains("already is the ca.crt"), "{again}");

    // --force renews (the Role's update), and the next patch follows the new CA.
    let mut force = create.clone();
    force.push("--force".to_string());
    let renewed = stdout(&certs(&identity, &force));
    assert!(
        renewed.contains("replaced the pair") && renewed.contains("--force"),
        "{renewed}"
    );
    let third = secret(&cluster, SECRET);
    let new_ca = decode(&third["data"]["ca.crt"]);
    assert_ne!(new_ca, ca);
    verifies(
        &new_ca,
        &decode(&third["data"]["tls.crt"]),
        "gateway-dns.gateway-dns.svc",
    )
    .unwrap();
    stdout(&certs(&identity, &patch));
    assert_eq!(ca_bundles(&cluster), vec![new_ca]);

    // A Service of another name: the pair no longer covers it and is replaced.
    let renamed: Vec<String> = create
        .iter()
        .map(|arg| match arg.as_str() {
            "--service-name=gateway-dns" => "--service-name=dns-webhook".to_string(),
            _ => arg.clone(),
        })
        .collect();
    assert_ne!(renamed, create);
    let replaced = stdout(&certs(&identity, &renamed));
    assert!(
        replaced.contains("(its certificate does not name dns-webhook)"),
        "{replaced}"
    );
    let fourth = secret(&cluster, SECRET);
    verifies(
        &decode(&fourth["data"]["ca.crt"]),
        &decode(&fourth["data"]["tls.crt"]),
        "dns-webhook.gateway-dns.svc",
    )
    .unwrap();
}

#[test]
fn certs_says_what_is_missing_and_keeps_foreign_keys() {
    let cluster = cluster_without_gateway_api();
    let admin = cluster.kubeconfig();
    let run = |args: &[&str]| {
        let mut all = vec!["certs".to_string()];
        all.extend(args.iter().map(|arg| arg.to_string()));
        certs(&admin, &all)
    };

    let no_secret = refused(&run(&[
        "--secret=gateway-dns/absent",
        "--patch-webhook=gateway-dns",
    ]));
    assert!(
        no_secret.contains("Secret gateway-dns/absent does not exist"),
        "{no_secret}"
    );

    // A Secret as kube-webhook-certgen left it (an earlier chart): Opaque, the CA under `ca`.
    let old = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: old-tls\n  namespace: \
               gateway-dns\ntype: Opaque\nstringData:\n  ca: not-a-ca\n  tls.crt: \"x\"\n  tls.key: \"y\"\n";
    cluster.apply(old, &[]).ok();
    let no_ca = refused(&run(&[
        "--secret=gateway-dns/old-tls",
        "--patch-webhook=gateway-dns",
    ]));
    assert!(
        no_ca.contains("Secret gateway-dns/old-tls has no ca.crt"),
        "{no_ca}"
    );
    // The create Job replaces its pair, keeping its type (immutable) and its other keys.
    let replaced = stdout(&run(&["--secret=gateway-dns/old-tls"]));
    assert!(replaced.contains("it has no ca.crt"), "{replaced}");
    let upgraded = secret(&cluster, "old-tls");
    assert_eq!(upgraded["type"], "Opaque");
    assert_eq!(decode(&upgraded["data"]["ca"]), b"not-a-ca");
    verifies(
        &decode(&upgraded["data"]["ca.crt"]),
        &decode(&upgraded["data"]["tls.crt"]),
        "gateway-dns.gateway-dns.svc",
    )
    .unwrap();

    let no_webhook = refused(&run(&[
        "--secret=gateway-dns/old-tls",
        "--patch-webhook=gateway-dns",
    ]));
    assert!(
        no_webhook.contains("ValidatingWebhookConfiguration gateway-dns does not exist"),
        "{no_webhook}"
    );

    // --out still writes files, and nothing reaches the cluster then.
    let dir = tempfile::tempdir().unwrap();
    let out = format!("--out={}", dir.path().display());
    stdout(&run(&[&out]));
    assert!(dir.path().join("ca.crt").exists());
}
