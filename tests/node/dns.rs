//! The embedded DNS server in the pods, through its Service: the ClusterIP and the NodePort
//! (on the node's address and on loopback) answer the published names, and keep answering
//! while the pods roll. The Service's default type, LoadBalancer, has no address on a cluster
//! without a load balancer: helm's NOTES say so and what to set.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::support::dig;
use crate::{NAMESPACE, NODE_IP, Node, Repeated};

pub fn the_embedded_server_answers_through_its_service_and_keeps_answering_in_a_roll(node: &Node) {
    let run = node.helm_install(&["--reuse-values", "--set", "dns.provider=embedded"]);
    assert!(run.success, "{run:?}");
    assert!(
        run.stdout.contains("dns.embedded.service.type"),
        "the NOTES do not say what to set without a load balancer:\n{}",
        run.stdout
    );

    let service = node
        .kubectl(&[
            "get",
            "service",
            "gateway-dns-dns",
            "-n",
            NAMESPACE,
            "-o",
            "json",
        ])
        .ok();
    let service: serde_json::Value = serde_json::from_str(&service).unwrap();
    assert_eq!(service["spec"]["type"], "LoadBalancer");
    assert!(
        service["status"]["loadBalancer"]["ingress"].is_null(),
        "an address without a load balancer? {service}"
    );
    let cluster_ip: std::net::IpAddr = service["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let node_port = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["protocol"] == "UDP")
        .and_then(|p| p["nodePort"].as_u64())
        .expect("a UDP node port") as u16;

    let servers = [
        SocketAddr::new(cluster_ip, 53),
        SocketAddr::new(NODE_IP.parse().unwrap(), node_port),
        SocketAddr::new([127, 0, 0, 1].into(), node_port),
    ];
    for server in servers {
        for tcp in [false, true] {
            node.wait_for(
                &format!("app.example.com through {server} (tcp: {tcp})"),
                Duration::from_secs(60),
                || dig::query(server, "app.example.com", "A", tcp).data("A") == ["203.0.113.10"],
            );
        }
    }
    println!(
        "the Service answers on {} (ClusterIP), {NODE_IP}:{node_port} and 127.0.0.1:{node_port} (NodePort), UDP and TCP",
        servers[0]
    );

    // A roll of every pod while a resolver asks through the ClusterIP, as a resolver would
    // (dig's 2 s timeout, 3 tries).
    let server = servers[0];
    let asking = Repeated::start(Duration::from_millis(100), move |_| {
        let answer = dig::query(server, "app.example.com", "A", false);
        if answer.data("A") == ["203.0.113.10"] {
            Ok(())
        } else {
            Err(format!("{answer:?}"))
        }
    });
    let before: Vec<String> = node.pods().into_iter().map(|(name, _, _)| name).collect();
    let started = Instant::now();
    let run = node.helm_install(&["--reuse-values", "--set", "logLevel=info"]);
    assert!(run.success, "{run:?}");
    node.wait_rolled(&before);
    let (asked, failures) = asking.stop();
    println!(
        "a roll of 3 pods in {:.1} s: {asked} queries through the ClusterIP, {} unanswered",
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(asked >= 20, "only {asked} queries");
    assert!(
        failures.is_empty(),
        "queries went unanswered in the roll: {failures:#?}"
    );
}
