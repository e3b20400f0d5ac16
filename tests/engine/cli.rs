//! `gateway-dns check` as a user runs it: the built binary over files, directories and stdin,
//! its JSON and text output and its exit codes (ARCHITECTURE.md, "Stable interfaces").

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::objects::crate_dir;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs the binary from the crate directory with a clean `GATEWAY_DNS_*` environment.
fn run_with(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gateway-dns"));
    command
        .args(args)
        .current_dir(crate_dir())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GATEWAY_DNS_") || key == "NO_COLOR" {
            command.env_remove(key);
        }
    }
    command.envs(env.iter().copied());
    let mut child = command.spawn().expect("the gateway-dns binary runs");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().expect("exited normally, not by a signal"),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

fn run(args: &[&str]) -> Run {
    run_with(args, None, &[])
}

fn json_of(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|err| panic!("stdout is not JSON ({err}):\n{}", run.stdout))
}

fn write(dir: &Path, relative: &str, text: &str) -> String {
    let path = dir.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

const GATEWAY_YAML: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  listeners:
  - {name: web, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
status:
  addresses: [{type: IPAddress, value: 192.0.2.10}]
";

fn route_yaml(name: &str, hostname: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: apps}}\n\
         spec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  hostnames: [{hostname}]\n"
    )
}

/// (dnsName, recordType, targets) of a JSON outcome.
fn records(outcome: &Value) -> Vec<(String, String, Vec<String>)> {
    outcome["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["dnsName"].as_str().unwrap().to_owned(),
                r["recordType"].as_str().unwrap().to_owned(),
                r["targets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect()
}

fn names(outcome: &Value) -> Vec<String> {
    records(outcome).into_iter().map(|(n, _, _)| n).collect()
}

// ---------------------------------------------------------------- the example cluster

#[test]
fn example_cluster_story() {
    let out = run(&["check", "--output", "json", "examples/cluster"]);
    assert_eq!(out.code, 1, "a denial exits 1; stderr: {}", out.stderr);
    let outcome = json_of(&out);
    assert_eq!(
        outcome["records"],
        json!([
            {"dnsName": "a.example.com", "recordType": "A", "targets": ["203.0.113.10"], "ttl": null,
             "gateways": ["infra/gw1"], "routes": ["HTTPRoute/apps/a1", "HTTPRoute/apps/a2"]},
            {"dnsName": "b.example.com", "recordType": "A", "targets": ["203.0.113.10"], "ttl": null,
             "gateways": ["infra/gw1"], "routes": ["HTTPRoute/apps/b1"]},
        ])
    );
    let violations = outcome["violations"].as_array().unwrap();
    assert_eq!(violations.len(), 2, "{violations:#?}");
    let b2 = &violations[0];
    assert_eq!(b2["reason"], "HostnameConflict");
    assert_eq!(b2["action"], "deny");
    assert_eq!(b2["object"], "HTTPRoute/apps/b2");
    assert_eq!(b2["hostname"], "b.example.com");
    let message = b2["message"].as_str().unwrap();
    assert!(
        message.contains("infra/gw1") && message.contains("b1"),
        "{message}"
    );
    let d1 = &violations[1];
    assert_eq!(d1["reason"], "NoMatchingListenerHostname");
    assert_eq!(d1["action"], "deny");
    assert_eq!(d1["object"], "HTTPRoute/apps/d1");
    assert_eq!(d1["hostname"], "d.example.com");
    let message = d1["message"].as_str().unwrap();
    assert!(
        message.contains("d.example.com")
            && message.contains("infra/gw3")
            && message.contains("c.example.com"),
        "{message}"
    );
}

#[test]
fn json_shape_is_the_stable_interface() {
    let outcome = json_of(&run(&["check", "--output", "json", "examples/cluster"]));
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&outcome), ["records", "violations"]);
    for record in outcome["records"].as_array().unwrap() {
        assert_eq!(
            keys(record),
            [
                "dnsName",
                "gateways",
                "recordType",
                "routes",
                "targets",
                "ttl"
            ]
        );
    }
    for violation in outcome["violations"].as_array().unwrap() {
        // The stable keys (ARCHITECTURE.md, "Stable interfaces"), plus `field` (the field path the admission answer also carries).
        assert_eq!(
            keys(violation),
            ["action", "field", "hostname", "message", "object", "reason"]
        );
        assert!(violation["field"].as_str().unwrap().starts_with("spec."));
    }
}

#[test]
fn example_cluster_as_text_for_a_person() {
    let out = run(&["check", "examples/cluster"]);
    assert_eq!(out.code, 1);
    assert!(!out.stdout.contains('\x1b'), "no colour when not a TTY");
    let lines: Vec<&str> = out.stdout.lines().collect();
    let header = lines[0];
    let columns: Vec<usize> = ["NAME", "TYPE", "TARGETS", "GATEWAYS", "ROUTES"]
        .iter()
        .map(|h| {
            header
                .find(h)
                .unwrap_or_else(|| panic!("{h} in {header:?}"))
        })
        .collect();
    let rows = [
        [
            "a.example.com",
            "A",
            "203.0.113.10",
            "infra/gw1",
            "HTTPRoute/apps/a1,HTTPRoute/apps/a2",
        ],
        [
            "b.example.com",
            "A",
            "203.0.113.10",
            "infra/gw1",
            "HTTPRoute/apps/b1",
        ],
    ];
    for (line, cells) in lines[1..3].iter().zip(rows) {
        for (start, cell) in columns.iter().zip(cells) {
            assert!(
                line[*start..].starts_with(cell),
                "column at {start} of {line:?} should read {cell}"
            );
            if *start > 0 {
                assert_eq!(&line[start - 1..*start], " ", "{line:?}");
            }
        }
    }
    let text = &out.stdout;
    let b2 = text
        .find("HTTPRoute/apps/b2\n")
        .expect("b2's findings are grouped");
    let d1 = text
        .find("HTTPRoute/apps/d1\n")
        .expect("d1's findings are grouped");
    assert!(b2 < d1);
    assert!(
        text[b2..d1].contains(
            "deny  HostnameConflict: b.example.com is already served by Gateway infra/gw1"
        )
    );
    assert!(text[d1..].contains("deny  NoMatchingListenerHostname: d.example.com"));
    assert!(text.contains("2 record(s), 2 denial(s), 0 warning(s)"));
}

#[test]
fn no_colour_even_when_forced_off_by_no_color() {
    let out = run_with(&["check", "examples/cluster"], None, &[("NO_COLOR", "1")]);
    assert!(!out.stdout.contains('\x1b'));
}

// ---------------------------------------------------------------- outputs and exit codes

#[test]
fn records_and_targets_are_sorted() {
    let dir = tempfile::tempdir().unwrap();
    // The Gateway of every test, with addresses out of order.
    let gateways = GATEWAY_YAML.replace(
        "  addresses: [{type: IPAddress, value: 192.0.2.10}]\n",
        "  addresses:
  - {type: IPAddress, value: 2001:db8::2}
  - {type: IPAddress, value: 192.0.2.20}
  - {type: IPAddress, value: 2001:db8::1}
  - {type: IPAddress, value: 192.0.2.10}
",
    );
    assert_ne!(gateways, GATEWAY_YAML);
    write(dir.path(), "gw.yaml", &gateways);
    let routes = ["z", "b", "m", "a"]
        .iter()
        .map(|n| route_yaml(n, &format!("{n}.example.com")))
        .collect::<Vec<_>>()
        .join("---\n");
    write(dir.path(), "routes.yaml", &routes);
    let out = run(&["check", "--output", "json", dir.path().to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let got = records(&json_of(&out));
    let mut expected = Vec::new();
    for n in ["a", "b", "m", "z"] {
        expected.push((
            format!("{n}.example.com"),
            "A".to_owned(),
            vec!["192.0.2.10".to_owned(), "192.0.2.20".to_owned()],
        ));
        expected.push((
            format!("{n}.example.com"),
            "AAAA".to_owned(),
            vec!["2001:db8::1".to_owned(), "2001:db8::2".to_owned()],
        ));
    }
    assert_eq!(got, expected);
}

#[test]
fn exit_zero_without_denials() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "all.yaml",
        &format!(
            "{GATEWAY_YAML}---\n{}---\n{}",
            route_yaml("ok", "ok.example.com"),
            // A warning (parent not found) does not fail the check.
            route_yaml("lost", "lost.example.com").replace("name: gw,", "name: nope,")
        ),
    );
    let out = run(&["check", "--output", "json", dir.path().to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let outcome = json_of(&out);
    assert_eq!(names(&outcome), ["ok.example.com"]);
    assert_eq!(outcome["violations"][0]["reason"], "ParentNotFound");
    assert_eq!(outcome["violations"][0]["action"], "warn");

    let text = run(&["check", dir.path().to_str().unwrap()]);
    assert_eq!(text.code, 0);
    assert!(
        text.stdout.contains("warn  ParentNotFound: "),
        "{}",
        text.stdout
    );
}

#[test]
fn malformed_yaml_exits_2_naming_file_and_document() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "broken.yaml",
        &format!("{GATEWAY_YAML}---\nkind: HTTPRoute\nmetadata: {{name: [unclosed\n"),
    );
    let out = run(&["check", &file]);
    assert_eq!(out.code, 2, "stdout: {}", out.stdout);
    assert!(
        out.stdout.is_empty(),
        "no outcome on input errors: {}",
        out.stdout
    );
    assert!(out.stderr.contains(&file), "{}", out.stderr);
    assert!(out.stderr.contains("document 2"), "{}", out.stderr);
    assert!(out.stderr.contains("not valid YAML"), "{}", out.stderr);
}

#[test]
fn malformed_json_exits_2_naming_file_and_document() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "broken.json",
        r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}} {"apiVersion": "#,
    );
    let out = run(&["check", &file]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains(&file)
            && out.stderr.contains("document 2")
            && out.stderr.contains("JSON"),
        "{}",
        out.stderr
    );
}

#[test]
fn undecodable_object_exits_2_naming_file_document_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: bad, namespace: apps}\n\
               spec:\n  parentRefs: [{name: gw, namespace: infra}]\n  hostnames: [ok.example.com, {not: a string}]\n";
    let file = write(
        dir.path(),
        "objects.yaml",
        &format!(
            "{GATEWAY_YAML}---\n{}---\n{bad}",
            route_yaml("ok", "ok.example.com")
        ),
    );
    let out = run(&["check", &file]);
    assert_eq!(out.code, 2);
    for part in [
        file.as_str(),
        "document 3",
        "HTTPRoute apps/bad",
        "spec.hostnames[1]",
    ] {
        assert!(out.stderr.contains(part), "{part} in {}", out.stderr);
    }
    // A bad item of a List names its index too.
    let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: a}\n\
         - apiVersion: gateway.networking.k8s.io/v1\n  kind: Gateway\n  metadata: {name: g, namespace: a}\n  spec: {listeners: [{name: l, port: eighty}]}\n";
    let file = write(dir.path(), "list.yaml", list);
    let out = run(&["check", &file]);
    assert_eq!(out.code, 2);
    for part in [
        file.as_str(),
        "document 1, items[1]",
        "spec.listeners[0].port",
    ] {
        assert!(out.stderr.contains(part), "{part} in {}", out.stderr);
    }
}

#[test]
fn duplicates_exit_2_naming_both_places() {
    let dir = tempfile::tempdir().unwrap();
    let first = write(
        dir.path(),
        "a.yaml",
        &format!("{GATEWAY_YAML}---\n{}", route_yaml("r", "a.example.com")),
    );
    let second = write(
        dir.path(),
        "b.yaml",
        &format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: apps}}\n---\n{}",
            route_yaml("r", "b.example.com")
        ),
    );
    let out = run(&["check", dir.path().to_str().unwrap()]);
    assert_eq!(out.code, 2);
    for part in [
        "HTTPRoute/apps/r",
        &format!("{first}: document 2"),
        &format!("{second}: document 2"),
    ] {
        assert!(out.stderr.contains(part), "{part} in {}", out.stderr);
    }
}

#[test]
fn missing_path_and_empty_directory_exit_2() {
    let out = run(&["check", "/nonexistent/gateway-dns-input"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("/nonexistent/gateway-dns-input"),
        "{}",
        out.stderr
    );
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "notes.txt", "not yaml");
    let out = run(&["check", dir.path().to_str().unwrap()]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("no .yaml"), "{}", out.stderr);
}

// ---------------------------------------------------------------- inputs

#[test]
fn dash_reads_stdin() {
    let input = format!(
        "{GATEWAY_YAML}---\n{}",
        route_yaml("r", "stdin.example.com")
    );
    let out = run_with(&["check", "--output", "json", "-"], Some(&input), &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(names(&json_of(&out)), ["stdin.example.com"]);
    // Errors on stdin name it.
    let out = run_with(&["check", "-"], Some("a: [unclosed\n"), &[]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("<stdin>: document 1"), "{}", out.stderr);
}

#[test]
fn directories_recurse_and_mix_yaml_json_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "gateways/gw.yaml", GATEWAY_YAML);
    write(
        dir.path(),
        "teams/a/deep/r1.yml",
        &route_yaml("r1", "one.example.com"),
    );
    write(
        dir.path(),
        "teams/b/routes.json",
        &serde_json::to_string(&json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r2", "namespace": "apps"},
            "spec": {"parentRefs": [{"name": "gw", "namespace": "infra"}], "hostnames": ["two.example.com"]}
        }))
        .unwrap(),
    );
    write(
        dir.path(),
        "teams/c/list.yaml",
        &format!(
            "apiVersion: v1\nkind: List\nitems:\n- {}",
            route_yaml("r3", "three.example.com")
                .trim_end()
                .replace('\n', "\n  ")
        ),
    );
    // Other kinds are skipped; hidden directories and other extensions are not read.
    write(
        dir.path(),
        "teams/c/other.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: c}\n",
    );
    write(dir.path(), ".hidden/dup.yaml", GATEWAY_YAML);
    write(dir.path(), "teams/README.md", "# not read\n");
    let out = run(&["check", "--output", "json", dir.path().to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        names(&json_of(&out)),
        ["one.example.com", "three.example.com", "two.example.com"]
    );
}

#[test]
fn several_paths_and_json_documents() {
    let dir = tempfile::tempdir().unwrap();
    let gw = write(dir.path(), "gw.yaml", GATEWAY_YAML);
    // Several JSON documents in one file, one after another.
    let routes = ["x", "y"]
        .iter()
        .map(|n| {
            json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "HTTPRoute",
                   "metadata": {"name": n, "namespace": "apps"},
                   "spec": {"parentRefs": [{"name": "gw", "namespace": "infra"}],
                            "hostnames": [format!("{n}.example.com")]}})
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n");
    let json_file = write(dir.path(), "routes.json", &routes);
    let out = run(&["check", "--output", "json", &gw, &json_file]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(names(&json_of(&out)), ["x.example.com", "y.example.com"]);
}

// ---------------------------------------------------------------- flags

#[test]
fn engine_flags_reach_the_engine() {
    let example = ["check", "--output", "json", "examples/cluster"];
    let with_flags = |flags: &[&str]| {
        let mut args = example.to_vec();
        args.extend_from_slice(flags);
        run(&args)
    };
    let warn = with_flags(&["--mode", "warn"]);
    assert_eq!(warn.code, 0, "warn mode denies nothing");
    let outcome = json_of(&warn);
    assert!(
        outcome["violations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["action"] == "warn")
    );

    let audit = with_flags(&["--mode", "audit"]);
    assert_eq!(audit.code, 0);
    assert!(
        json_of(&audit)["violations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["action"] == "audit")
    );

    let overridden = with_flags(&[
        "--action",
        "HostnameConflict=warn",
        "--action",
        "NoMatchingListenerHostname=ignore",
    ]);
    assert_eq!(overridden.code, 0);
    let outcome = json_of(&overridden);
    assert_eq!(outcome["violations"].as_array().unwrap().len(), 1);
    assert_eq!(outcome["violations"][0]["action"], "warn");

    let exclude = with_flags(&["--conflict-resolution", "exclude"]);
    assert_eq!(names(&json_of(&exclude)), ["a.example.com"]);

    let only_gw2 = with_flags(&["--gateway-name", "gw2"]);
    let outcome = json_of(&only_gw2);
    assert_eq!(names(&outcome), ["b.example.com"]);
    assert_eq!(outcome["records"][0]["targets"], json!(["203.0.113.20"]));

    let elsewhere = with_flags(&["--namespace", "elsewhere"]);
    assert_eq!(elsewhere.code, 0);
    assert_eq!(
        json_of(&elsewhere),
        json!({"records": [], "violations": []})
    );

    // The example routes carry no status: in status mode nothing is attached, so nothing is found.
    let status = with_flags(&["--attachment", "status"]);
    assert_eq!(status.code, 0);
    assert_eq!(json_of(&status), json!({"records": [], "violations": []}));

    let by_env = run_with(&example, None, &[("GATEWAY_DNS_MODE", "warn")]);
    assert_eq!(by_env.code, 0, "flags can come from GATEWAY_DNS_*");
}

#[test]
fn bad_flag_values_exit_2() {
    for flags in [
        &["--action", "NoSuchReason=deny"][..],
        &["--action", "HostnameConflict=maybe"],
        &["--gateway-selector", "a in b"],
        &["--mode", "loud"],
    ] {
        let mut args = vec!["check", "examples/cluster"];
        args.extend_from_slice(flags);
        let out = run(&args);
        assert_eq!(out.code, 2, "{flags:?}: {}", out.stderr);
        assert!(!out.stderr.is_empty(), "{flags:?} says why");
        assert!(out.stdout.is_empty(), "{flags:?}");
    }
}

#[test]
fn listener_sets_flag_takes_a_boolean() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = GATEWAY_YAML.replace(
        "spec:\n",
        "spec:\n  allowedListeners: {namespaces: {from: All}}\n",
    );
    let listener_set = "\
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: ls, namespace: apps}
spec:
  parentRef: {name: gw, namespace: infra}
  listeners:
  - {name: team, protocol: HTTPS, port: 443, hostname: '*.team.example.com'}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: apps}
spec:
  parentRefs: [{kind: ListenerSet, name: ls}]
  hostnames: [app.team.example.com]
";
    write(dir.path(), "gw.yaml", &gateway);
    write(dir.path(), "ls.yaml", listener_set);
    let path = dir.path().to_str().unwrap();
    let on = run(&["check", "--output", "json", path]);
    assert_eq!(on.code, 0, "{}", on.stderr);
    assert_eq!(names(&json_of(&on)), ["app.team.example.com"]);
    let explicit = run(&["check", "--output", "json", "--listener-sets", "true", path]);
    assert_eq!(json_of(&explicit), json_of(&on));
    let off = run(&[
        "check",
        "--output",
        "json",
        "--listener-sets",
        "false",
        path,
    ]);
    assert_eq!(off.code, 0, "{}", off.stderr);
    assert!(names(&json_of(&off)).is_empty());
    assert_eq!(run(&["check", "--listener-sets", "maybe", path]).code, 2);
}
