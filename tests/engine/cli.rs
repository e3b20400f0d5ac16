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
    assert_eq!(
        keys(&outcome),
        ["records", "skipped", "summary", "violations"]
    );
    assert_eq!(
        outcome["summary"],
        json!({"records": 2, "denials": 2, "warnings": 0, "audits": 0, "skipped": 0})
    );
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
        // The stable keys (ARCHITECTURE.md, "Stable interfaces"): `field` is the field path
        // the admission answer also carries; file, document and lines say where to change it.
        assert_eq!(
            keys(violation),
            [
                "action",
                "document",
                "field",
                "fieldLine",
                "file",
                "hostname",
                "line",
                "message",
                "object",
                "reason"
            ]
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
        .find("HTTPRoute/apps/b2  examples/cluster/routes.yaml:")
        .expect("b2's findings are grouped");
    let d1 = text
        .find("HTTPRoute/apps/d1  examples/cluster/routes.yaml:")
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
    assert_eq!(json_of(&elsewhere)["records"], json!([]));
    assert_eq!(json_of(&elsewhere)["violations"], json!([]));

    // The example routes carry no status: in status mode nothing is attached, so nothing is found.
    let status = with_flags(&["--attachment", "status"]);
    assert_eq!(status.code, 0);
    assert_eq!(json_of(&status)["records"], json!([]));
    assert_eq!(json_of(&status)["violations"], json!([]));

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
    for on_again in [
        &["--listener-sets"][..],
        &["--listener-sets=true"],
        &["--listener-sets=YES"],
    ] {
        let explicit = run(&[&["check", "--output", "json"][..], on_again, &[path]].concat());
        assert_eq!(json_of(&explicit), json_of(&on), "{on_again:?}");
    }
    for off_flag in [
        "--listener-sets=false",
        "--listener-sets=0",
        "--listener-sets=no",
    ] {
        let off = run(&["check", "--output", "json", off_flag, path]);
        assert_eq!(off.code, 0, "{}", off.stderr);
        assert!(names(&json_of(&off)).is_empty(), "{off_flag}");
    }
    for env_value in ["false", "0", "no", "FALSE"] {
        let off = run_with(
            &["check", "--output", "json", path],
            None,
            &[("GATEWAY_DNS_LISTENER_SETS", env_value)],
        );
        assert!(names(&json_of(&off)).is_empty(), "{env_value}");
    }
    assert_eq!(run(&["check", "--listener-sets=maybe", path]).code, 2);
    // The older form, `true` or `false` as a separate word, is still read.
    let separate = run(&[
        "check",
        "--output",
        "json",
        "--listener-sets",
        "false",
        path,
    ]);
    assert_eq!(separate.code, 0, "{}", separate.stderr);
    assert!(names(&json_of(&separate)).is_empty());
    // Any other word after a switch is a path, not a value.
    let maybe = run(&["check", "--listener-sets", "maybe", path]);
    assert_eq!(maybe.code, 2);
    assert!(
        maybe.stderr.contains("maybe: No such file"),
        "{}",
        maybe.stderr
    );
}

// ---------------------------------------------------------------- strict and located

#[test]
fn skipped_documents_are_reported_in_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let config_map = write(
        dir.path(),
        "config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n",
    );
    let empty = write(dir.path(), "empty.yaml", "# generated: nothing\n");
    let out = run(&["check", "--output", "json", &config_map, &empty]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let outcome = json_of(&out);
    assert_eq!(
        outcome["skipped"],
        json!([
            {"file": config_map, "document": 1, "line": 1, "apiVersion": "v1", "kind": "ConfigMap"},
            {"file": empty, "document": 1, "line": null, "apiVersion": null, "kind": null},
        ])
    );
    assert_eq!(outcome["summary"]["skipped"], 2);

    let text = run(&["check", &config_map, &empty]);
    assert_eq!(text.code, 0);
    assert!(
        text.stdout.contains(&format!(
            "{config_map}: document 1 (line 1): ConfigMap (v1)"
        )) && text.stdout.contains(&format!("{empty}: no documents"))
            && text
                .stdout
                .contains("0 record(s), 0 denial(s), 0 warning(s), 2 skipped document(s)"),
        "{}",
        text.stdout
    );
    let github = run(&["check", "--output", "github", &config_map]);
    assert!(
        github.stdout.starts_with(&format!(
            "::notice file={config_map},line=1,title=Skipped::"
        )),
        "{}",
        github.stdout
    );
}

#[test]
fn a_typo_in_a_gateway_api_kind_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "routes.yaml",
        &format!(
            "{GATEWAY_YAML}---\n{}",
            route_yaml("r", "a.example.com").replace("kind: HTTPRoute", "kind: HTTPRoutes")
        ),
    );
    let out = run(&["check", &file]);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(out.stdout.is_empty());
    for part in [
        format!("{file}: document 2 (line 10)"),
        "unknown kind \"HTTPRoutes\"".to_owned(),
    ] {
        assert!(out.stderr.contains(&part), "{part} in {}", out.stderr);
    }
    // GatewayClass is a known kind gateway-dns has no use for: skipped, not an error.
    let class = write(
        dir.path(),
        "class.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: c}\n",
    );
    assert_eq!(run(&["check", &class]).code, 0);
}

#[test]
fn duplicate_keys_exit_2_with_file_line_and_column() {
    // `cat gateways.yaml routes.yaml` without a `---` between them.
    let joined = format!("{GATEWAY_YAML}{}", route_yaml("r", "a.example.com"));
    let out = run_with(&["check", "-"], Some(&joined), &[]);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("<stdin>:9:1: document 1: duplicate key \"apiVersion\" in the top-level mapping (first written on line 1)"),
        "{}",
        out.stderr
    );
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "gw.yaml",
        &GATEWAY_YAML.replace(
            "metadata: {name: gw, namespace: infra}",
            "metadata: {name: gw, namespace: infra, name: other}",
        ),
    );
    let out = run(&["check", &file]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains(&format!(
            "{file}:3:40: document 1: duplicate key \"name\" in `metadata`"
        )),
        "{}",
        out.stderr
    );
}

/// A route with a warning (unknown parent) and one with a denial (outside the listener).
fn findings_fixture(dir: &Path) -> String {
    let gateway = GATEWAY_YAML.replace(
        "protocol: HTTP, port: 80,",
        "protocol: HTTP, port: 80, hostname: '*.example.com',",
    );
    let routes = format!(
        "{}---\n{}",
        route_yaml("lost", "lost.example.com").replace("name: gw,", "name: nope,"),
        route_yaml("outside", "www.example.org")
    );
    write(dir, "gw.yaml", &gateway);
    write(dir, "routes.yaml", &routes)
}

#[test]
fn findings_carry_file_document_and_lines() {
    let dir = tempfile::tempdir().unwrap();
    let routes = findings_fixture(dir.path());
    let out = run(&["check", "--output", "json", dir.path().to_str().unwrap()]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let outcome = json_of(&out);
    let violations = outcome["violations"].as_array().unwrap();
    let lost = violations
        .iter()
        .find(|v| v["object"] == "HTTPRoute/apps/lost")
        .unwrap();
    assert_eq!(lost["file"], routes.as_str());
    assert_eq!(lost["document"], 1);
    assert_eq!(lost["line"], 1);
    assert_eq!(lost["field"], "spec.parentRefs[0]");
    assert_eq!(lost["fieldLine"], 5);
    let outside = violations
        .iter()
        .find(|v| v["object"] == "HTTPRoute/apps/outside")
        .unwrap();
    assert_eq!(
        (
            &outside["document"],
            &outside["line"],
            &outside["field"],
            &outside["fieldLine"]
        ),
        (
            &json!(2),
            &json!(8),
            &json!("spec.hostnames[0]"),
            &json!(13)
        )
    );
    assert_eq!(
        outcome["summary"],
        json!({"records": 0, "denials": 1, "warnings": 1, "audits": 0, "skipped": 0})
    );

    let text = run(&["check", dir.path().to_str().unwrap()]);
    assert!(
        text.stdout.contains(&format!(
            "HTTPRoute/apps/outside  {routes}:8 (document 2)\n"
        )) && text
            .stdout
            .contains(&format!("        at {routes}:13 (spec.hostnames[0])\n")),
        "{}",
        text.stdout
    );
}

#[test]
fn fail_on_sets_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    findings_fixture(dir.path());
    let path = dir.path().to_str().unwrap();
    let only_warning = ["--action", "NoMatchingListenerHostname=ignore"];
    let default = run(&[&["check", path][..], &only_warning].concat());
    assert_eq!(default.code, 0, "a warning alone passes by default");
    let deny = run(&[&["check", "--fail-on", "deny", path][..], &only_warning].concat());
    assert_eq!(deny.code, 0);
    let warn = run(&[&["check", "--fail-on", "warn", path][..], &only_warning].concat());
    assert_eq!(warn.code, 1, "{}", warn.stdout);
    let by_env = run_with(
        &[&["check", path][..], &only_warning].concat(),
        None,
        &[("GATEWAY_DNS_FAIL_ON", "warn")],
    );
    assert_eq!(by_env.code, 1);
    assert_eq!(run(&["check", "--fail-on", "audit", path]).code, 2);
}

#[test]
fn github_output_is_workflow_commands() {
    let dir = tempfile::tempdir().unwrap();
    let routes = findings_fixture(dir.path());
    let out = run(&["check", "--output", "github", dir.path().to_str().unwrap()]);
    assert_eq!(out.code, 1);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    assert!(
        lines[0].starts_with(&format!(
            "::warning file={routes},line=5,title=ParentNotFound (HTTPRoute/apps/lost)::ParentNotFound: "
        )),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with(&format!(
            "::error file={routes},line=13,title=NoMatchingListenerHostname (HTTPRoute/apps/outside)::"
        )),
        "{}",
        lines[1]
    );
    assert_eq!(
        lines[2],
        "gateway-dns check: 0 record(s), 1 denial(s), 1 warning(s), 0 skipped document(s)"
    );
    // Input errors become an annotation too, so the run says why it stopped.
    let bad = run_with(
        &["check", "--output", "github", "-"],
        Some("a: [unclosed\n"),
        &[],
    );
    assert_eq!(bad.code, 2);
    assert!(
        bad.stdout
            .starts_with("::error title=gateway-dns check::<stdin>: document 1"),
        "{}",
        bad.stdout
    );
}

#[test]
fn check_help_documents_the_exit_codes() {
    let out = run(&["check", "--help"]);
    assert_eq!(out.code, 0);
    for part in ["Exit status:", "  0  ", "  1  ", "  2  ", "--fail-on"] {
        assert!(out.stdout.contains(part), "{part} in {}", out.stdout);
    }
}

// ---------------------------------------------------------------- the CLI for external-dns users

/// Parses as the binary does (external-dns's flags mapped and the older `--flag false` form
/// joined first).
fn parse(args: &[&str]) -> Result<gateway_dns::cli::Cli, clap::Error> {
    use clap::Parser as _;
    let argv = std::iter::once("gateway-dns")
        .chain(args.iter().copied())
        .map(std::ffi::OsString::from);
    let (argv, _notes) = gateway_dns::cli::external_dns_flags(argv)
        .unwrap_or_else(|refused| panic!("{args:?}: {refused}"));
    gateway_dns::cli::Cli::try_parse_from(gateway_dns::cli::join_boolean_values(argv))
}

fn serve_args(args: &[&str]) -> gateway_dns::cli::ServeArgs {
    match parse(&[&["serve"][..], args].concat()) {
        Ok(gateway_dns::cli::Cli {
            command: gateway_dns::cli::Command::Serve(serve),
        }) => *serve,
        other => panic!("{args:?}: {other:?}"),
    }
}

/// (alias, what it stands for): external-dns's names, hidden from --help.
const ALIASES: [(&str, &str); 7] = [
    ("--domain-filter", "--zone"),
    ("--label-filter", "--route-selector"),
    ("--rfc2136-host", "--rfc2136-server"),
    ("--rfc2136-port", "--rfc2136-server"),
    ("--metrics-address", "--metrics-listen"),
    ("--namespace", "--route-namespace"),
    ("--log-level", "--log-level"),
];

#[test]
fn external_dns_names_are_hidden_aliases() {
    let serve = serve_args(&[
        "--domain-filter",
        "example.com,example.org",
        "--label-filter",
        "team=a",
        "--rfc2136-host",
        "bind.dns.svc",
        "--rfc2136-port",
        "5353",
        "--metrics-address",
        ":7979",
        "--namespace",
        "apps",
        "--log-level",
        "warning",
        "--log-format",
        "json",
    ]);
    assert_eq!(serve.provider_flags.zones, ["example.com", "example.org"]);
    assert_eq!(serve.engine.route_selector.as_deref(), Some("team=a"));
    assert_eq!(
        serve.provider_flags.rfc2136_host.as_deref(),
        Some("bind.dns.svc")
    );
    assert_eq!(serve.provider_flags.rfc2136_port, Some(5353));
    assert_eq!(serve.metrics_listen, Some("0.0.0.0:7979".parse().unwrap()));
    assert_eq!(serve.engine.namespace.as_deref(), Some("apps"));
    assert_eq!(serve.log_level, "warn");
    assert_eq!(serve.log_format, gateway_dns::cli::LogFormat::Json);
    // Both ways of naming the RFC 2136 server at once are refused.
    assert!(parse(&["serve", "--rfc2136-server", "a:53", "--rfc2136-host", "b"]).is_err());

    let help = run(&["serve", "--help"]).stdout;
    let migrating =
        std::fs::read_to_string(crate_dir().join("docs/migrating-from-external-dns.md")).unwrap();
    for (alias, target) in ALIASES {
        if alias != target {
            assert!(
                !help.contains(&format!("{alias} ")),
                "{alias} is hidden from --help"
            );
            assert!(help.contains(target), "{target} in --help");
        }
        assert!(
            migrating.contains(&format!("`{alias}")),
            "docs/migrating-from-external-dns.md lists {alias}"
        );
    }
}

#[test]
fn external_dns_flags_of_a_command_line_map_with_a_note_or_are_refused_with_what_to_do() {
    let serve = serve_args(&[
        "--gateway-label-filter",
        "dns=public",
        "--rfc2136-tsig-keyname=external-dns",
        "--rfc2136-tsig-secret-alg",
        "hmac-sha512",
        "--source=gateway-httproute",
        "--source",
        "gateway-grpcroute",
        "--registry=txt",
    ]);
    assert_eq!(serve.engine.gateway_selector.as_deref(), Some("dns=public"));
    assert_eq!(
        serve.provider_flags.rfc2136_tsig_key_name.as_deref(),
        Some("external-dns")
    );
    assert_eq!(serve.provider_flags.rfc2136_tsig_algorithm, "hmac-sha512");

    // One line each, saying what it maps to; the files are checked as without them.
    let plain = run(&[
        "check",
        "--output",
        "json",
        "--gateway-selector=tier!=none",
        "examples/cluster",
    ]);
    let mapped = run(&[
        "check",
        "--output",
        "json",
        "--gateway-label-filter=tier!=none",
        "--source=gateway-httproute",
        "--source=gateway-tcproute",
        "--registry",
        "txt",
        "examples/cluster",
    ]);
    assert_eq!(mapped.code, plain.code, "{}", mapped.stderr);
    assert_eq!(mapped.stdout, plain.stdout);
    let notes: Vec<&str> = mapped.stderr.lines().collect();
    assert_eq!(notes.len(), 4, "{}", mapped.stderr);
    assert!(
        notes[0].contains("--gateway-label-filter is external-dns's name for --gateway-selector")
    );
    assert!(
        notes[1].starts_with("gateway-dns: --source=gateway-httproute: gateway-dns always reads")
    );
    assert!(notes[2].starts_with("gateway-dns: --source=gateway-tcproute: "));
    assert!(notes[3].contains("--registry=txt: record ownership is kept in TXT records"));

    // What cannot hold is refused, saying what to do, and never with a tip for another flag.
    for (args, says) in [
        (
            &["--source=service"][..],
            "keep the service source in external-dns",
        ),
        (
            &["--source", "ingress"][..],
            "keep the ingress source in external-dns",
        ),
        (&["--registry=dynamodb"][..], "remove --registry"),
        (
            &["--rfc2136-tsig-secret", "c2VjcmV0"][..],
            "--rfc2136-tsig-secret-file FILE, or set GATEWAY_DNS_RFC2136_TSIG_SECRET",
        ),
        (
            &["--pdns-api-key=k"][..],
            "--pdns-api-key-file FILE, or set GATEWAY_DNS_PDNS_API_KEY",
        ),
        (
            &["--txt-encrypt-aes-key", "k"][..],
            "--txt-encrypt-aes-key-file FILE, or set GATEWAY_DNS_TXT_ENCRYPT_AES_KEY",
        ),
    ] {
        let refused = run(&[&["serve"][..], args].concat());
        assert_eq!(refused.code, 2, "{args:?}: {}", refused.stderr);
        assert!(
            refused.stderr.contains(says),
            "{args:?}: {}",
            refused.stderr
        );
        assert!(
            !refused.stderr.contains("tip:"),
            "{args:?}: {}",
            refused.stderr
        );
    }

    let migrating =
        std::fs::read_to_string(crate_dir().join("docs/migrating-from-external-dns.md")).unwrap();
    for flag in [
        "`--gateway-label-filter`",
        "`--rfc2136-tsig-keyname`",
        "`--rfc2136-tsig-secret-alg`",
        "`--source=gateway-httproute`",
        "`--registry=txt`",
    ] {
        assert!(
            migrating.contains(flag),
            "docs/migrating-from-external-dns.md lists {flag}"
        );
    }
}

#[test]
fn serve_notes_mapped_flags_in_its_log_and_text_logs_have_no_colour_off_a_terminal() {
    // Nothing to run: serve logs the note, then stops on the configuration (exit 2).
    let out = run(&[
        "serve",
        "--log-format",
        "text",
        "--registry=txt",
        "--webhook=false",
        "--sync=false",
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let note = out
        .stderr
        .lines()
        .find(|line| line.contains("--registry=txt: record ownership is kept in TXT records"))
        .unwrap_or_else(|| panic!("no note in:\n{}", out.stderr));
    assert!(note.contains("INFO"), "{note}");
    assert!(
        !out.stderr.contains('\x1b'),
        "colour codes in a pipe: {:?}",
        out.stderr
    );
}

#[test]
fn booleans_are_switches_with_an_optional_value() {
    let defaults = serve_args(&[]);
    assert!(defaults.webhook && defaults.sync && defaults.leader_election);
    assert!(!defaults.dry_run && !defaults.once);
    let set = serve_args(&[
        "--dry-run",
        "--once=true",
        "--webhook=false",
        "--leader-election=0",
    ]);
    assert!(set.dry_run && set.once && !set.webhook && !set.leader_election);
    for (value, expected) in [
        ("true", true),
        ("yes", true),
        ("1", true),
        ("false", false),
        ("no", false),
        ("0", false),
    ] {
        assert_eq!(
            serve_args(&[&format!("--sync={value}")]).sync,
            expected,
            "{value}"
        );
    }
    assert!(parse(&["serve", "--dry-run=maybe"]).is_err());
    // The older separate word is read for `true` and `false`, the words it always took.
    let legacy = serve_args(&["--webhook", "false", "--sync", "true", "--dry-run"]);
    assert!(!legacy.webhook && legacy.sync && legacy.dry_run);
    assert!(parse(&["serve", "--webhook", "no"]).is_err());
    // Nothing after `--` is rewritten.
    assert!(parse(&["check", "--", "--listener-sets", "false"]).is_ok());
    let by_env = run_with(
        &["check", "--output", "json", "examples/cluster"],
        None,
        &[("GATEWAY_DNS_IGNORE_HOSTNAME_ANNOTATION", "yes")],
    );
    assert_eq!(by_env.code, 1, "{}", by_env.stderr);
    let bad_env = run_with(
        &["check", "examples/cluster"],
        None,
        &[("GATEWAY_DNS_IGNORE_HOSTNAME_ANNOTATION", "maybe")],
    );
    assert_eq!(bad_env.code, 2);
    assert!(
        bad_env.stderr.contains("true|false|1|0|yes|no"),
        "{}",
        bad_env.stderr
    );
}

#[test]
fn certs_flags_are_named_like_serves() {
    for args in [
        &[
            "certs",
            "--service-name",
            "web",
            "--service-namespace",
            "edge",
        ][..],
        // The earlier names keep working.
        &["certs", "--service", "web", "--namespace", "edge"],
    ] {
        match parse(args) {
            Ok(gateway_dns::cli::Cli {
                command: gateway_dns::cli::Command::Certs(certs),
            }) => {
                assert_eq!(
                    (
                        certs.service_name.as_str(),
                        certs.service_namespace.as_str()
                    ),
                    ("web", "edge"),
                    "{args:?}"
                );
            }
            other => panic!("{args:?}: {other:?}"),
        }
    }
}

#[test]
fn serve_help_is_grouped_under_headings() {
    let help = run(&["serve", "--help"]).stdout;
    let headings = [
        ("Sources:", "--manifests"),
        ("Webhook:", "--listen"),
        ("DNS:", "--provider"),
        ("Provider (RFC 2136, PowerDNS):", "--rfc2136-server"),
        ("Leader election:", "--lease-name"),
        ("Metrics and logs:", "--metrics-listen"),
        ("Engine (shared with check):", "--conflict-resolution"),
        ("Exit status:", "--once"),
    ];
    let mut last = 0;
    for (heading, flag) in headings {
        let at = help
            .find(&format!("\n{heading}\n"))
            .unwrap_or_else(|| panic!("{heading} in {help}"));
        assert!(at > last, "{heading} comes after the one before");
        let section_end = help[at + 1..]
            .find("\n\n\n")
            .map_or(help.len(), |end| at + 1 + end);
        let next_heading = headings
            .iter()
            .filter_map(|(h, _)| help[at + 1..].find(&format!("\n{h}\n")))
            .min()
            .map_or(section_end, |offset| at + 1 + offset);
        assert!(
            help[at..next_heading].contains(flag),
            "{flag} under {heading}"
        );
        last = at;
    }
}

#[test]
fn ownership_and_namespace_domains_in_json_and_text_and_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let in_namespace = |ns: &str, name: &str, hostname: &str, created: &str| {
        route_yaml(name, hostname).replace(
            "namespace: apps}",
            &format!("namespace: {ns}, creationTimestamp: \"{created}\"}}"),
        )
    };
    write(
        dir.path(),
        "all.yaml",
        &format!(
            "{GATEWAY_YAML}---\n{}---\n{}---\n{}---\n{}",
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n  annotations: {gateway-dns.io/allowed-hostnames: \"*.b.example.com,shop.example.com\"}\n",
            in_namespace("team-a", "site", "shop.example.com", "2026-01-01T00:00:00Z"),
            in_namespace("team-b", "late", "shop.example.com", "2026-02-01T00:00:00Z"),
            in_namespace(
                "team-b",
                "other",
                "other.example.com",
                "2026-02-01T00:00:00Z"
            ),
        ),
    );
    let path = dir.path().to_str().unwrap();
    let out = run(&[
        "check",
        "--output",
        "json",
        "--hostname-ownership",
        "namespace",
        path,
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let outcome = json_of(&out);
    assert_eq!(names(&outcome), ["shop.example.com"]);
    assert_eq!(
        outcome["records"][0]["routes"],
        json!(["HTTPRoute/team-a/site"])
    );
    let found: Vec<(&str, &str, &str)> = outcome["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["object"].as_str().unwrap(),
                v["reason"].as_str().unwrap(),
                v["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "HTTPRoute/team-b/late",
                "HostnameOwnedByOtherNamespace",
                "deny"
            ),
            (
                "HTTPRoute/team-b/other",
                "HostnameNotAllowedForNamespace",
                "deny"
            ),
        ]
    );
    let text = run_with(
        &["check", path],
        None,
        &[("GATEWAY_DNS_HOSTNAME_OWNERSHIP", "namespace")],
    );
    assert_eq!(text.code, 1);
    assert!(
        text.stdout.contains(
            "deny  HostnameOwnedByOtherNamespace: shop.example.com belongs to namespace team-a"
        ),
        "{}",
        text.stdout
    );
    // Off (the default), team-b shares the name; --require-allowed-hostnames (here from its
    // variable) leaves team-a, which has no annotation, nothing.
    let required = run_with(
        &["check", "--output", "json", path],
        None,
        &[("GATEWAY_DNS_REQUIRE_ALLOWED_HOSTNAMES", "true")],
    );
    let outcome = json_of(&required);
    assert_eq!(
        outcome["records"][0]["routes"],
        json!(["HTTPRoute/team-b/late"])
    );
    assert!(
        outcome["violations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["object"] == "HTTPRoute/team-a/site"
                && v["reason"] == "HostnameNotAllowedForNamespace"),
        "{outcome}"
    );
}

// ---------------------------------------------------------------- --annotation-prefix

/// Routes with external-dns annotations under three prefixes: a custom one, the default one
/// and (on a route of its own, as the configured prefix wins over it) the older alpha one.
const PREFIXED_ROUTES: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
  namespace: apps
  annotations:
    dns.example.org/hostname: custom.example.com
    dns.example.org/ttl: \"90\"
    external-dns.kubernetes.io/hostname: default.example.com
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [spec.example.com]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: old
  namespace: apps
  annotations:
    external-dns.alpha.kubernetes.io/hostname: alpha.example.com
spec:
  parentRefs: [{name: gw, namespace: infra}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: pinned
  namespace: apps
  annotations:
    dns.example.org/target: 198.51.100.7
spec:
  parentRefs: [{name: gw, namespace: infra}]
  hostnames: [pinned.example.com]
";

#[test]
fn annotation_prefix_chooses_which_external_dns_annotations_count() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "gw.yaml", GATEWAY_YAML);
    write(dir.path(), "routes.yaml", PREFIXED_ROUTES);
    let path = dir.path().to_str().unwrap();
    let ttl_of = |outcome: &Value, name: &str| {
        outcome["records"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["dnsName"] == name)
            .map(|r| r["ttl"].clone())
    };

    // The default prefix: its annotation and the alpha one count, the custom ones do not.
    let default = json_of(&run(&["check", "--output", "json", path]));
    assert_eq!(
        names(&default),
        [
            "alpha.example.com",
            "default.example.com",
            "pinned.example.com",
            "spec.example.com"
        ]
    );
    assert!(
        records(&default).contains(&(
            "pinned.example.com".into(),
            "A".into(),
            vec!["192.0.2.10".into()]
        )),
        "{default}"
    );

    // A custom prefix (external-dns's --annotation-prefix): its hostname, TTL and target count,
    // the alpha prefix still does, the default one no longer.
    for custom in [
        run(&[
            "check",
            "--output",
            "json",
            "--annotation-prefix",
            "dns.example.org/",
            path,
        ]),
        run_with(
            &["check", "--output", "json", path],
            None,
            &[("GATEWAY_DNS_ANNOTATION_PREFIX", "dns.example.org/")],
        ),
    ] {
        assert_eq!(custom.code, 0, "{}", custom.stderr);
        let custom = json_of(&custom);
        assert_eq!(
            names(&custom),
            [
                "alpha.example.com",
                "custom.example.com",
                "pinned.example.com",
                "spec.example.com"
            ]
        );
        assert_eq!(ttl_of(&custom, "custom.example.com"), Some(json!(90)));
        assert!(
            records(&custom).contains(&(
                "pinned.example.com".into(),
                "A".into(),
                vec!["198.51.100.7".into()]
            )),
            "{custom}"
        );
    }

    // Findings name the annotation as it is spelled under the configured prefix.
    let forbidden = json_of(&run(&[
        "check",
        "--output",
        "json",
        "--annotation-prefix=dns.example.org/",
        "--allow-route-targets=false",
        path,
    ]));
    let fields: Vec<&str> = forbidden["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["reason"] == "RouteTargetNotAllowed")
        .map(|v| v["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["metadata.annotations[dns.example.org/target]"]);

    let bad = run(&["check", "--annotation-prefix", "dns.example.org", path]);
    assert_eq!(bad.code, 2, "{}", bad.stdout);
    assert!(bad.stderr.contains("--annotation-prefix"), "{}", bad.stderr);
}

/// Every default a subcommand's flags carry parses: clap reads a default only when the flag is
/// not given, so a default its own parser refuses (`0s` for a duration) would stop every run
/// that leaves the flag out, and no test that sets it would notice.
#[test]
fn every_subcommand_parses_with_its_defaults() {
    use clap::Parser as _;
    use gateway_dns::cli::Cli;
    for args in [
        &["gateway-dns", "serve"][..],
        &["gateway-dns", "check", "x.yaml"],
        &["gateway-dns", "explain", "a.example.com"],
        &["gateway-dns", "zone", "owners", "--provider", "rfc2136"],
        &[
            "gateway-dns",
            "zone",
            "release",
            "--provider",
            "rfc2136",
            "--owner",
            "east",
        ],
        &["gateway-dns", "certs"],
    ] {
        if let Err(err) = Cli::try_parse_from(args) {
            panic!("{args:?}: {err}");
        }
    }
}
