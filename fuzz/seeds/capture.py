#!/usr/bin/env python3
"""Seeds for the fuzz corpora from real servers (docs/fuzzing.md).

Starts BIND (named) with a zone holding every record type gateway-dns handles and a TSIG key,
puts a recording proxy in front of it, and runs dig and nsupdate through the proxy:
  - the queries it sees become seeds of the embedded_dns target;
  - the answers (a SOA answer, then an AXFR's messages, each framed as over TCP) become seeds of
    the rfc2136_answers target.
Starts PowerDNS (pdns_server, sqlite backend) with its API, creates a zone through the API and
saves the API's JSON answers as seeds of the pdns_zone target.

Usage: fuzz/seeds/capture.py <fuzz/corpus directory>   (needs named, dig, nsupdate, pdns_server)
"""
import hashlib
import json
import os
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SECRET = "c2VjcmV0LWZvci10aGUtZnV6emVy"
KEY = "update"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def save(directory, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def wait_port(port, udp=False):
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


class Proxy:
    """UDP and TCP on one port, forwarding to `upstream`, recording (query, [answers])."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.port = free_port()
        self.exchanges = []
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.tcp = socket.socket()
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(("127.0.0.1", self.port))
        self.tcp.listen()
        threading.Thread(target=self.serve_udp, daemon=True).start()
        threading.Thread(target=self.serve_tcp, daemon=True).start()

    def serve_udp(self):
        while True:
            query, peer = self.udp.recvfrom(65535)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as up:
                up.settimeout(2)
                up.sendto(query, ("127.0.0.1", self.upstream))
                try:
                    answer = up.recv(65535)
                except socket.timeout:
                    self.exchanges.append(("udp", query, []))
                    continue
            self.exchanges.append(("udp", query, [answer]))
            self.udp.sendto(answer, peer)

    def serve_tcp(self):
        while True:
            client, _ = self.tcp.accept()
            threading.Thread(target=self.relay, args=(client,), daemon=True).start()

    def relay(self, client):
        with client, socket.create_connection(("127.0.0.1", self.upstream)) as up:
            up.settimeout(1)
            while True:
                try:
                    query = read_frame(client)
                except OSError:
                    return
                if query is None:
                    return
                up.sendall(frame(query))
                answers = []
                while True:
                    try:
                        answer = read_frame(up)
                    except OSError:  # a timeout, or the server closed
                        break
                    if answer is None:
                        break
                    answers.append(answer)
                    try:
                        client.sendall(frame(answer))
                    except OSError:
                        break
                    if not is_transfer(query):
                        break
                self.exchanges.append(("tcp", query, answers))


def frame(data):
    return struct.pack(">H", len(data)) + data


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def read_frame(sock):
    head = read_exact(sock, 2)
    if head is None:
        return None
    return read_exact(sock, struct.unpack(">H", head)[0])


def question_type(query):
    """The QTYPE of the first question (0 when there is none)."""
    if len(query) < 12 or struct.unpack(">H", query[4:6])[0] == 0:
        return 0
    i = 12
    while i < len(query) and query[i] != 0:
        i += 1 + query[i]
    return struct.unpack(">H", query[i + 1 : i + 3])[0] if i + 3 <= len(query) else 0


def is_transfer(query):
    return question_type(query) in (251, 252)


def start_bind(root):
    port = free_port()
    records = "\n".join(f"r{i} IN A 192.0.2.{i % 250}" for i in range(300))
    zone = f"""$TTL 300
@ IN SOA ns1.example.com. hostmaster.example.com. 7 3600 600 86400 60
@ IN NS ns1.example.com.
ns1 IN A 127.0.0.1
www IN A 192.0.2.10
www IN A 192.0.2.11
www IN AAAA 2001:db8::10
alias IN CNAME www.example.com.
away IN CNAME elsewhere.example.net.
*.apps IN A 192.0.2.20
txt IN TXT "v=spf1 -all" "second \\"quoted\\" string"
long IN TXT "{'x' * 250}" "{'y' * 250}"
a.b.deep IN TXT "deep"
mx IN MX 10 www.example.com.
srv._tcp IN SRV 0 0 443 www.example.com.
{records}
"""
    with open(os.path.join(root, "example.com.zone"), "w") as f:
        f.write(zone)
    with open(os.path.join(root, "named.conf"), "w") as f:
        f.write(f"""options {{
    directory "{root}";
    listen-on port {port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    pid-file none;
    session-keyfile none;
    recursion no;
    dnssec-validation no;
}};
key "{KEY}" {{ algorithm hmac-sha256; secret "{SECRET}"; }};
zone "example.com" {{
    type primary;
    file "{root}/example.com.zone";
    allow-update {{ key "{KEY}"; }};
    allow-transfer {{ any; }};
}};
""")
    named = subprocess.Popen(
        ["named", "-g", "-c", os.path.join(root, "named.conf")],
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(root, "named.log"), "w"),
    )
    wait_port(port)
    return named, port


def dig(port, *args):
    subprocess.run(
        ["dig", "@127.0.0.1", "-p", str(port), "+tries=1", "+time=2", *args],
        stdout=subprocess.DEVNULL,
        check=False,
    )


def capture_dns(corpus, root):
    named, bind_port = start_bind(root)
    try:
        proxy = Proxy(bind_port)
        p = proxy.port
        key = ["-y", f"hmac-sha256:{KEY}:{SECRET}"]
        for args in (
            ["www.example.com", "A"],
            ["www.example.com", "AAAA"],
            ["alias.example.com", "A"],
            ["away.example.com", "CNAME"],
            ["x.apps.example.com", "A"],
            ["txt.example.com", "TXT"],
            ["long.example.com", "TXT", "+bufsize=512"],
            ["deep.example.com", "TXT"],
            ["missing.example.com", "A"],
            ["example.com", "SOA"],
            ["example.com", "NS", "+nsid"],
            ["example.com", "ANY", "+tcp"],
            ["www.example.com", "A", "+dnssec", "+bufsize=1232"],
            ["www.example.com", "A", "+noedns", "+tcp"],
            ["www.example.com", "A", "+cookie"],
            ["example.org", "A"],
            ["example.com", "SOA", *key],
            ["example.com", "AXFR", *key],
            ["example.com", "IXFR=1", *key],
            ["example.com", "AXFR"],
            ["example.com", "IXFR=7"],
        ):
            dig(p, *args)
        # An UPDATE and a NOTIFY (the messages the rfc2136 client and the embedded server send).
        subprocess.run(
            ["nsupdate", *key],
            input=f"server 127.0.0.1 {p}\nzone example.com\nprereq nxrrset new.example.com A\n"
            "update add new.example.com 300 A 192.0.2.99\nupdate add new.example.com 300 TXT \"owner\"\n"
            "update delete r1.example.com A\nsend\n",
            text=True,
            stdout=subprocess.DEVNULL,
            check=False,
        )
        time.sleep(3)  # the TCP relays wait up to a second for more messages
        for kind, query, answers in proxy.exchanges:
            save(os.path.join(corpus, "embedded_dns"), query)
        # rfc2136_answers: flags (0: unsigned; 1: signed), the request id, then framed answers.
        soa = [a for k, q, a in proxy.exchanges if question_type(q) == 6 and a]
        transfers = [a for k, q, a in proxy.exchanges if is_transfer(q) and a]
        updates = [a for k, q, a in proxy.exchanges if len(q) > 2 and (q[2] >> 3) & 0xF == 5 and a]
        for answer in soa + updates:
            signed = 1 if b"hmac-sha256" in answer[0] else 0
            save(os.path.join(corpus, "rfc2136_answers"), bytes([signed]) + answer[0][:2] + frame(answer[0]))
        for first in soa:
            for messages in transfers:
                # Listing: the SOA answer, then the transfer, all under the transfer's id.
                ident = messages[0][:2]
                soa_answer = ident + first[0][2:]
                save(
                    os.path.join(corpus, "rfc2136_answers"),
                    b"\x00" + ident + frame(soa_answer) + b"".join(frame(m) for m in messages),
                )
    finally:
        named.terminate()
        named.wait()


def api(port, method, path, body=None):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"X-API-Key": "fuzz-seeds", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.read()
    except urllib.error.HTTPError as error:
        return error.read()


def capture_pdns(corpus, root):
    db = os.path.join(root, "pdns.sqlite3")
    schema = "/usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql"
    with sqlite3.connect(db) as conn, open(schema) as f:
        conn.executescript(f.read())
    dns_port, api_port = free_port(), free_port()
    with open(os.path.join(root, "pdns.conf"), "w") as f:
        f.write(
            f"launch=gsqlite3\ngsqlite3-database={db}\nlocal-address=127.0.0.1\nlocal-port={dns_port}\n"
            f"api=yes\napi-key=fuzz-seeds\nwebserver=yes\nwebserver-address=127.0.0.1\n"
            f"webserver-port={api_port}\nwebserver-allow-from=127.0.0.0/8\nsocket-dir={root}\n"
        )
    pdns = subprocess.Popen(
        ["pdns_server", f"--config-dir={root}", "--guardian=no", "--daemon=no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(api_port)
        out = os.path.join(corpus, "pdns_zone")
        zones = "/api/v1/servers/localhost/zones"
        api(api_port, "POST", zones, {"name": "example.com.", "kind": "Native", "nameservers": ["ns1.example.com."]})
        rrsets = [
            {"name": "www.example.com.", "type": "A", "ttl": 300, "changetype": "REPLACE",
             "records": [{"content": "192.0.2.10", "disabled": False}, {"content": "192.0.2.11", "disabled": False}]},
            {"name": "www.example.com.", "type": "AAAA", "ttl": 300, "changetype": "REPLACE",
             "records": [{"content": "2001:db8::10", "disabled": False}]},
            {"name": "alias.example.com.", "type": "CNAME", "ttl": 60, "changetype": "REPLACE",
             "records": [{"content": "www.example.com.", "disabled": False}]},
            {"name": "txt.example.com.", "type": "TXT", "ttl": 300, "changetype": "REPLACE",
             "records": [{"content": '"heritage=external-dns,external-dns/owner=default" "\\"quoted\\" \\255"', "disabled": False}]},
            {"name": "*.apps.example.com.", "type": "A", "ttl": 300, "changetype": "REPLACE",
             "records": [{"content": "192.0.2.20", "disabled": True}]},
            {"name": "mx.example.com.", "type": "MX", "ttl": 300, "changetype": "REPLACE",
             "records": [{"content": "10 www.example.com.", "disabled": False}]},
        ]
        save(out, api(api_port, "PATCH", zones + "/example.com.", {"rrsets": rrsets}) or b"{}")
        save(out, api(api_port, "GET", zones + "/example.com."))
        save(out, api(api_port, "GET", zones + "/missing.example."))
        save(out, api(api_port, "PATCH", zones + "/example.com.", {"rrsets": [{"name": "bad name", "type": "A"}]}))
    finally:
        pdns.terminate()
        pdns.wait()


def main():
    corpus = sys.argv[1]
    with tempfile.TemporaryDirectory() as root:
        capture_dns(corpus, root)
    with tempfile.TemporaryDirectory() as root:
        capture_pdns(corpus, root)


if __name__ == "__main__":
    main()
