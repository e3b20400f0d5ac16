#[derive(Debug, thiserror::Error)]
pub enum Error {}
