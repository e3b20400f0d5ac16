//! The admission webhook, its files in the order a request passes through them: the HTTPS
//! [`server`] takes the request with the shared [`state`]; [`review`] reads the AdmissionReview
//! into an [`review::AdmissionRequest`]; [`dispatch`] answers it within its deadline, inline or on
//! the blocking pool, through the handler; [`handler`] is that handler, the only file here that
//! knows the engine (whose admission rules decide); [`encode`] writes the answer. [`tls`] serves
//! the certificates that [`certs`] makes, and [`certs_in_cluster`] keeps in a Secret and a
//! webhook configuration's `caBundle`.

pub mod certs;
pub mod certs_in_cluster;
pub(crate) mod dispatch;
pub mod encode;
pub mod handler;
pub mod review;
pub mod server;
pub mod state;
pub mod tls;
