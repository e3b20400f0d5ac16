//! The rule engine: pure, synchronous, no IO. Hostnames, attachment, names, records, conflicts and
//! findings (ARCHITECTURE.md, "The rules"). The webhook, the sync loop and `check` all call it,
//! over a [`World`] they provide.

pub mod admission;
pub mod attach;
pub mod cidr;
pub mod claimants;
pub mod explain;
pub mod explain_parents;
pub mod explain_text;
pub mod grace;
pub mod health;
pub mod hostname;
pub mod hostname_ownership;
pub mod names;
pub mod selector;
pub mod settle;
mod world;
pub mod zone;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::model::{LabelSelector, Route, StringMap};

pub use hostname_ownership::HostnameOwnership;
pub use names::evaluate_route;
pub use settle::{Outcome, Record};
pub use world::{
    Claim, KeptAddresses, NameSource, Origin, RawFinding, RouteEntry, RouteEval, RouteId, World,
};

/// external-dns's default annotation prefix (its `--annotation-prefix`); `--annotation-prefix`
/// changes it, as it does for external-dns.
pub const DEFAULT_ANNOTATION_PREFIX: &str = "external-dns.kubernetes.io/";
/// The older prefix, still read after the configured one.
pub const ALPHA_ANNOTATION_PREFIX: &str = "external-dns.alpha.kubernetes.io/";
/// Namespace label that overrides `--mode` for routes in that namespace.
pub const MODE_LABEL: &str = "gateway-dns.io/mode";
/// Namespace label that allows (`allow`) or forbids (`forbid`) the target annotation on routes
/// in that namespace, overriding `--allow-route-targets` (ARCHITECTURE.md, "Names").
pub const ROUTE_TARGETS_LABEL: &str = "gateway-dns.io/route-targets";

/// Joins `parts` into one exactly sized String. Finding messages are built on every review;
/// `format!` would grow its buffer a step at a time and go through the formatting machinery.
pub(crate) fn concat(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|part| part.len()).sum());
    for part in parts {
        out.push_str(part);
    }
    out
}

/// `n` in decimal, written into `buf` (field paths such as `spec.hostnames[3]`), without `fmt`.
pub(crate) fn decimal(n: usize, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    let mut rest = n;
    loop {
        at -= 1;
        buf[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&buf[at..]).unwrap_or_default()
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown value {value:?} for {what} (expected one of: {expected})")]
    UnknownValue {
        what: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("--action takes REASON=deny|warn|ignore, got {0:?}")]
    BadAction(String),
    #[error("--annotation-prefix must end with '/' (e.g. external-dns.kubernetes.io/), got {0:?}")]
    BadAnnotationPrefix(String),
    #[error("--shared-name takes a DNS name or *.suffix, got {0:?}")]
    BadSharedName(String),
    #[error(transparent)]
    Selector(#[from] selector::SelectorError),
    #[error(transparent)]
    Cidr(#[from] cidr::BadCidr),
}

/// The one table of reasons: each row is a reason and its default action. The enum, its order
/// (which sorts findings and the metrics' series), `Reason::ALL`, the names and the list an
/// unknown name is told all come from it.
macro_rules! reasons {
    ($($reason:ident => $action:ident,)+) => {
        /// Stable finding reasons (ARCHITECTURE.md, "Findings").
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Reason {
            $($reason,)+
        }

        impl Reason {
            pub const ALL: [Reason; [$(stringify!($reason)),+].len()] = [$(Reason::$reason,)+];

            /// Every reason's name, comma-separated, in table order.
            const NAMES: &'static str = concat_names!($($reason),+);

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$reason => stringify!($reason),)+
                }
            }

            pub fn default_action(self) -> Action {
                match self {
                    $(Reason::$reason => Action::$action,)+
                }
            }
        }
    };
}

/// `A, B, C` from the identifiers `A`, `B`, `C`.
macro_rules! concat_names {
    ($first:ident $(, $rest:ident)*) => {
        concat!(stringify!($first) $(, ", ", stringify!($rest))*)
    };
}

reasons! {
    HostnameConflict => Deny,
    NoMatchingListenerHostname => Deny,
    HostnameOutsideListener => Warn,
    InvalidHostname => Deny,
    NotAllowedByListeners => Deny,
    NoMatchingParent => Warn,
    ParentNotFound => Warn,
    NoParentRefs => Warn,
    GatewayHasNoAddress => Warn,
    GatewayNotProgrammed => Warn,
    InheritedWildcardHostname => Warn,
    TooManyHostnames => Deny,
    TooManyParentRefs => Deny,
    HostnameOwnedByOtherNamespace => Deny,
    HostnameNotAllowedForNamespace => Deny,
    RouteTargetNotAllowed => Deny,
    CnameNotAllowed => Warn,
    TtlConflict => Warn,
    TargetUnhealthy => Warn,
    HostnameOwnedInZone => Deny,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Reason {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Reason, ConfigError> {
        Reason::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| ConfigError::UnknownValue {
                what: "reason",
                value: s.to_owned(),
                expected: Reason::NAMES,
            })
    }
}

/// What happens to a finding. `Audit` is what deny and warn become in audit mode: logged and
/// counted, never returned to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    Deny,
    Warn,
    Audit,
    Ignore,
}

impl Action {
    pub const ALL: [Action; 4] = [Action::Deny, Action::Warn, Action::Audit, Action::Ignore];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "deny",
            Action::Warn => "warn",
            Action::Audit => "audit",
            Action::Ignore => "ignore",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Findings counted by action: the one count `check`'s summary and `serve`'s summary line
/// share, so the two never tell one world differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ActionCounts {
    pub denials: usize,
    pub warnings: usize,
    pub audits: usize,
}

impl ActionCounts {
    pub fn of<'f>(findings: impl IntoIterator<Item = &'f Finding>) -> ActionCounts {
        let mut counts = ActionCounts::default();
        for finding in findings {
            match finding.action {
                Action::Deny => counts.denials += 1,
                Action::Warn => counts.warnings += 1,
                Action::Audit => counts.audits += 1,
                Action::Ignore => {}
            }
        }
        counts
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Enforce,
    Warn,
    Audit,
}

impl FromStr for Mode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Mode, ConfigError> {
        match s {
            "enforce" => Ok(Mode::Enforce),
            "warn" => Ok(Mode::Warn),
            "audit" => Ok(Mode::Audit),
            _ => Err(ConfigError::UnknownValue {
                what: "mode",
                value: s.to_owned(),
                expected: "enforce, warn, audit",
            }),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttachmentMode {
    /// Predicted from spec (the webhook's view: the object under review has no status yet).
    #[default]
    Spec,
    /// Only parents the route's status marks Accepted=True (external-dns's behaviour).
    Status,
}

impl FromStr for AttachmentMode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<AttachmentMode, ConfigError> {
        match s {
            "spec" => Ok(AttachmentMode::Spec),
            "status" => Ok(AttachmentMode::Status),
            _ => Err(ConfigError::UnknownValue {
                what: "attachment",
                value: s.to_owned(),
                expected: "spec, status",
            }),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConflictResolution {
    /// The oldest route's claim keeps the name (creationTimestamp, then namespace/name, then Gateway).
    #[default]
    OldestWins,
    /// A conflicting name is published nowhere.
    Exclude,
}

impl FromStr for ConflictResolution {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<ConflictResolution, ConfigError> {
        match s {
            "oldest-wins" => Ok(ConflictResolution::OldestWins),
            "exclude" => Ok(ConflictResolution::Exclude),
            _ => Err(ConfigError::UnknownValue {
                what: "conflict resolution",
                value: s.to_owned(),
                expected: "oldest-wins, exclude",
            }),
        }
    }
}

/// Which Gateways and routes one installation manages.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub gateway_name: Option<String>,
    pub gateway_namespace: Option<String>,
    pub gateway_selector: Option<LabelSelector>,
    pub namespace: Option<String>,
    pub route_selector: Option<LabelSelector>,
    pub annotation_filter: Option<LabelSelector>,
    /// Which of a Gateway's `status.addresses` are published (`--target-cidr`,
    /// `--exclude-target-cidr`).
    pub targets: cidr::TargetFilter,
}

/// Everything that shapes a decision. Shared by check, the webhook and the sync loop.
#[derive(Debug, Clone)]
pub struct Config {
    pub attachment: AttachmentMode,
    pub scope: Scope,
    pub listener_sets: bool,
    pub allow_inherited_wildcards: bool,
    pub ignore_hostname_annotation: bool,
    pub conflict_resolution: ConflictResolution,
    pub mode: Mode,
    pub actions: BTreeMap<Reason, Action>,
    /// Most hostnames (spec plus annotation) a route may have; more are `TooManyHostnames`
    /// and the route publishes nothing, so its cost stays bounded everywhere.
    pub max_route_hostnames: usize,
    /// Most parentRefs a route may have; more are `TooManyParentRefs`, likewise.
    pub max_route_parent_refs: usize,
    /// How long a Gateway that lost its addresses keeps publishing its last ones
    /// (ARCHITECTURE.md, "Address-loss grace"); zero turns the grace off.
    pub address_loss_grace: Duration,
    /// Whether the target annotation on a route replaces its Gateway's addresses; the Namespace
    /// label [`ROUTE_TARGETS_LABEL`] overrides it per namespace.
    pub allow_route_targets: bool,
    /// The managed zones (canonical names): a CNAME cannot be published at their apex
    /// (ARCHITECTURE.md, "Records and conflicts"). Empty when unknown (`check` without `--zone`).
    pub zones: Vec<String>,
    /// Names that may resolve to several Gateways on purpose (`--shared-name`: exact, or
    /// `*.suffix` for every name below suffix), canonical: they publish the union of their
    /// claims' targets and never conflict (ARCHITECTURE.md, "Names shared on purpose").
    pub shared_names: Vec<String>,
    /// Whether a hostname belongs to the namespace of its oldest route (ARCHITECTURE.md,
    /// "Namespaces and hostnames").
    pub hostname_ownership: HostnameOwnership,
    /// A namespace without the allowed-hostnames annotation may publish nothing.
    pub require_allowed_hostnames: bool,
    /// The prefix of the external-dns annotations (`--annotation-prefix`, external-dns's flag of
    /// the same name); [`ALPHA_ANNOTATION_PREFIX`] is read too (ARCHITECTURE.md, "Names").
    pub annotation_prefix: String,
    /// Publish a Gateway's addresses whatever its Programmed condition says
    /// (`--publish-unprogrammed`; ARCHITECTURE.md, "Readiness").
    pub publish_unprogrammed: bool,
}

/// The default `--address-loss-grace`: long enough for a load balancer to be re-provisioned or a
/// Gateway controller to restart.
pub const DEFAULT_ADDRESS_LOSS_GRACE: Duration = Duration::from_secs(600);

/// Far above any real route: `spec.hostnames` allows 16 and the external-dns annotation
/// rarely lists more than a few dozen.
pub const DEFAULT_MAX_ROUTE_HOSTNAMES: usize = 1024;
/// The Gateway API schema allows 32 parentRefs; twice that leaves room for unvalidated manifests.
pub const DEFAULT_MAX_ROUTE_PARENT_REFS: usize = 64;

impl Default for Config {
    fn default() -> Config {
        Config {
            attachment: AttachmentMode::Spec,
            scope: Scope::default(),
            listener_sets: true,
            allow_inherited_wildcards: false,
            ignore_hostname_annotation: false,
            conflict_resolution: ConflictResolution::OldestWins,
            mode: Mode::Enforce,
            actions: BTreeMap::new(),
            max_route_hostnames: DEFAULT_MAX_ROUTE_HOSTNAMES,
            max_route_parent_refs: DEFAULT_MAX_ROUTE_PARENT_REFS,
            address_loss_grace: DEFAULT_ADDRESS_LOSS_GRACE,
            allow_route_targets: true,
            zones: Vec::new(),
            shared_names: Vec::new(),
            annotation_prefix: DEFAULT_ANNOTATION_PREFIX.to_owned(),
            publish_unprogrammed: false,
            hostname_ownership: HostnameOwnership::Off,
            require_allowed_hostnames: false,
        }
    }
}

impl Config {
    /// Parses one `--action REASON=ACTION` value.
    pub fn parse_action(text: &str) -> Result<(Reason, Action), ConfigError> {
        let (reason, action) = text
            .split_once('=')
            .ok_or_else(|| ConfigError::BadAction(text.to_owned()))?;
        let action = match action {
            "deny" => Action::Deny,
            "warn" => Action::Warn,
            "ignore" => Action::Ignore,
            _ => return Err(ConfigError::BadAction(text.to_owned())),
        };
        Ok((reason.parse()?, action))
    }

    /// Reads an external-dns annotation under the configured prefix, then under the older
    /// alpha prefix.
    pub fn annotation<'a>(&self, annotations: &'a StringMap, name: &str) -> Option<&'a str> {
        [self.annotation_prefix.as_str(), ALPHA_ANNOTATION_PREFIX]
            .iter()
            .find_map(|prefix| annotations.get_joined(prefix, name))
    }

    /// The field path findings give for the external-dns annotation `name`.
    pub fn annotation_field(&self, name: &str) -> String {
        concat(&["metadata.annotations[", &self.annotation_prefix, name, "]"])
    }

    /// Is this an annotation the engine reads (see [`Config::annotation`])?
    pub fn is_engine_annotation(&self, key: &str) -> bool {
        key.starts_with(self.annotation_prefix.as_str()) || key.starts_with(ALPHA_ANNOTATION_PREFIX)
    }

    /// The route as the engine reads it under this configuration: labels only when routes are
    /// selected by label, annotations only under the external-dns prefixes unless routes are
    /// filtered by annotation. The index stores routes trimmed, so a cluster's bookkeeping
    /// labels and annotations (Helm, Argo CD, kubectl) cost nothing there.
    pub fn trim_route(&self, route: Arc<Route>) -> Arc<Route> {
        let drop_labels = self.scope.route_selector.is_none() && !route.meta.labels.is_empty();
        let drop_annotations = self.scope.annotation_filter.is_none()
            && route
                .meta
                .annotations
                .iter()
                .any(|(key, _)| !self.is_engine_annotation(key));
        if !drop_labels && !drop_annotations {
            return route;
        }
        let mut route = Arc::unwrap_or_clone(route);
        if drop_labels {
            route.meta.labels = StringMap::default();
        }
        if drop_annotations {
            route.meta.annotations = route
                .meta
                .annotations
                .filtered(|key| self.is_engine_annotation(key));
        }
        Arc::new(route)
    }

    /// The mode for a route in a namespace with these labels (the Namespace label wins). The
    /// value is read in any case: `Warn` written by hand must not silently mean enforce.
    pub fn mode_for(&self, namespace_labels: Option<&StringMap>) -> Mode {
        namespace_labels
            .and_then(|labels| labels.get(MODE_LABEL))
            .and_then(|value| value.trim().to_ascii_lowercase().parse().ok())
            .unwrap_or(self.mode)
    }

    /// This configuration with these managed zones (any spelling; kept canonical, sorted).
    pub fn with_zones<'z>(mut self, zones: impl IntoIterator<Item = &'z String>) -> Config {
        self.zones = zones
            .into_iter()
            .map(|zone| crate::model::dns_name::canonical(zone).into_owned())
            .collect();
        self.zones.sort();
        self.zones.dedup();
        self
    }

    /// Parses `--shared-name` values: DNS names or `*.suffix`, kept canonical.
    pub fn parse_shared_names(values: &[String]) -> Result<Vec<String>, ConfigError> {
        let mut names = Vec::with_capacity(values.len());
        for value in values {
            let name = crate::model::dns_name::parse_hostname(value)
                .map_err(|_| ConfigError::BadSharedName(value.clone()))?;
            names.push(name.into_owned());
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Is `name` (canonical) on the `--shared-name` list?
    pub fn is_shared_name(&self, name: &str) -> bool {
        crate::model::dns_name::in_name_list(&self.shared_names, name)
    }

    /// May routes in a namespace with these labels override their targets (the label wins)?
    pub fn route_targets_allowed(&self, namespace_labels: Option<&StringMap>) -> bool {
        // In any case, as the mode label.
        let label = namespace_labels
            .and_then(|labels| labels.get(ROUTE_TARGETS_LABEL))
            .map(|value| value.trim().to_ascii_lowercase());
        match label.as_deref() {
            Some("allow") => true,
            Some("forbid") => false,
            _ => self.allow_route_targets,
        }
    }

    /// The action for a reason under a mode: `--action` override, then the mode's downgrade.
    pub fn action_for(&self, reason: Reason, mode: Mode) -> Action {
        let action = self
            .actions
            .get(&reason)
            .copied()
            .unwrap_or(reason.default_action());
        match (action, mode) {
            (Action::Ignore, _) => Action::Ignore,
            (_, Mode::Audit) => Action::Audit,
            (Action::Deny, Mode::Warn) => Action::Warn,
            (action, _) => action,
        }
    }
}

/// A finding with its action resolved, attributed to an object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// `Kind/namespace/name` of the object the finding is about.
    pub object: String,
    pub reason: Reason,
    pub action: Action,
    pub hostname: Option<String>,
    /// Field path in the object, e.g. `spec.hostnames[1]`.
    pub field: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_table_reads_back() {
        let names: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(Reason::NAMES, names.join(", "));
        for reason in Reason::ALL {
            assert_eq!(reason.as_str().parse::<Reason>(), Ok(reason));
        }
        let denying: Vec<Reason> = Reason::ALL
            .into_iter()
            .filter(|r| r.default_action() == Action::Deny)
            .collect();
        assert_eq!(denying.len(), 10);
    }

    #[test]
    fn decimals_and_concatenation_match_format() {
        for n in [0, 7, 10, 99, 100, 65_535, usize::MAX] {
            assert_eq!(decimal(n, &mut [0; 20]), n.to_string());
        }
        assert_eq!(concat(&["a", "", "bc", "d"]), "abcd");
        assert_eq!(concat(&[]), "");
    }

    #[test]
    fn actions_follow_overrides_and_modes() {
        let mut cfg = Config::default();
        assert_eq!(
            cfg.action_for(Reason::HostnameConflict, Mode::Enforce),
            Action::Deny
        );
        assert_eq!(
            cfg.action_for(Reason::HostnameConflict, Mode::Warn),
            Action::Warn
        );
        assert_eq!(
            cfg.action_for(Reason::NoParentRefs, Mode::Audit),
            Action::Audit
        );
        let (reason, action) = Config::parse_action("NoParentRefs=deny").unwrap();
        cfg.actions.insert(reason, action);
        assert_eq!(
            cfg.action_for(Reason::NoParentRefs, Mode::Enforce),
            Action::Deny
        );
        cfg.actions.insert(Reason::HostnameConflict, Action::Ignore);
        assert_eq!(
            cfg.action_for(Reason::HostnameConflict, Mode::Audit),
            Action::Ignore
        );
        assert!(Config::parse_action("Nope=deny").is_err());
        assert!(Config::parse_action("NoParentRefs=maybe").is_err());
    }

    #[test]
    fn namespace_label_overrides_mode() {
        let cfg = Config::default();
        let labels = StringMap::from_pairs([(MODE_LABEL.to_owned(), "audit".to_owned())]);
        assert_eq!(cfg.mode_for(Some(&labels)), Mode::Audit);
        assert_eq!(cfg.mode_for(None), Mode::Enforce);
        let bad = StringMap::from_pairs([(MODE_LABEL.to_owned(), "bogus".to_owned())]);
        assert_eq!(cfg.mode_for(Some(&bad)), Mode::Enforce);
    }
}
