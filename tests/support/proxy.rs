//! A loopback TCP proxy that a test can cut, stall and restore: the network faults between one
//! client and a real server (the API server keeps running for everyone else). TLS passes through
//! it untouched, so the client still verifies the server's certificate.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

/// What the link between the client and the server does now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Up,
    /// Connections are closed and refused: requests fail at once.
    Cut,
    /// Bytes are held in both directions and new connections are accepted but not answered:
    /// requests hang, as over a link that drops every packet.
    Stalled,
}

struct Shared {
    link: watch::Sender<Link>,
    connections: Mutex<Vec<AbortHandle>>,
}

/// Forwards every connection to `target` until cut or stalled; stops on drop.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            link: watch::Sender::new(Link::Up),
            connections: Mutex::new(Vec::new()),
        });
        let acceptor = tokio::spawn({
            let shared = shared.clone();
            async move {
                while let Ok((inbound, _)) = listener.accept().await {
                    if *shared.link.borrow() == Link::Cut {
                        // Refused as a dead network would refuse: the connection closes at once.
                        drop(inbound);
                        continue;
                    }
                    let link = shared.link.subscribe();
                    let task = tokio::spawn(async move {
                        if let Ok(outbound) = TcpStream::connect(target).await {
                            let (from_client, to_client) = inbound.into_split();
                            let (from_server, to_server) = outbound.into_split();
                            tokio::join!(
                                pump(from_client, to_server, link.clone()),
                                pump(from_server, to_client, link),
                            );
                        }
                    });
                    let mut connections = shared.connections.lock().unwrap();
                    connections.retain(|c| !c.is_finished());
                    connections.push(task.abort_handle());
                }
            }
        });
        Proxy {
            addr,
            shared,
            acceptor,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Closes every open connection and refuses new ones until [`Proxy::restore`].
    pub fn cut(&self) {
        self.shared.link.send_replace(Link::Cut);
        for connection in self.shared.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }

    /// Holds every byte, on open connections and new ones, until [`Proxy::restore`]: requests
    /// neither fail nor complete. What was held is delivered late on restore, as TCP would.
    pub fn stall(&self) {
        self.shared.link.send_replace(Link::Stalled);
    }

    pub fn restore(&self) {
        self.shared.link.send_replace(Link::Up);
    }
}

/// Copies one direction of a connection, holding each chunk while the link is stalled.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut link: watch::Receiver<Link>) {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        match link.wait_for(|l| *l != Link::Stalled).await {
            Ok(l) if *l == Link::Up => {}
            _ => break,
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        for connection in self.shared.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }
}
