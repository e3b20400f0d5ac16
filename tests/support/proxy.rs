//! A loopback TCP proxy that a test can cut and restore: the network fault between one client
//! and a real server (the API server keeps running for everyone else). TLS passes through it
//! untouched, so the client still verifies the server's certificate.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

struct Shared {
    cut: AtomicBool,
    connections: Mutex<Vec<AbortHandle>>,
}

/// Forwards every connection to `target` until cut; stops on drop.
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
            cut: AtomicBool::new(false),
            connections: Mutex::new(Vec::new()),
        });
        let acceptor = tokio::spawn({
            let shared = shared.clone();
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    if shared.cut.load(Ordering::SeqCst) {
                        // Refused as a dead network would refuse: the connection closes at once.
                        drop(inbound);
                        continue;
                    }
                    let task = tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(target).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
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
        self.shared.cut.store(true, Ordering::SeqCst);
        for connection in self.shared.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }

    pub fn restore(&self) {
        self.shared.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        for connection in self.shared.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }
}
