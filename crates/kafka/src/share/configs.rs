//! The share group's configs that the host reads or sets on the broker: the
//! ones a connector sets (`share.*`, KIP-932's group configs), the delivery
//! count limit, read so that the task's handling of a record's last delivery
//! follows the broker's rule instead of a copy the user must keep in step,
//! and where a new group starts reading.

use super::cluster::Cluster;
use super::error::ShareError;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::{
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

/// Kafka's default `group.share.delivery.count.limit`.
pub const KAFKA_DEFAULT_DELIVERY_LIMIT: u16 = 5;
const GROUP_KEY: &str = "share.delivery.count.limit";
const BROKER_KEY: &str = "group.share.delivery.count.limit";
/// ConfigResource types of DescribeConfigs.
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_GROUP: i8 = 32;

/// How many deliveries the broker allows a record, and where that came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryLimit {
    pub limit: u16,
    /// Said in the task's status, e.g. "group config share.delivery.count.limit".
    pub source: String,
}

/// Asks a broker: the group's own `share.delivery.count.limit`, else the
/// broker's `group.share.delivery.count.limit`, else Kafka's default.
pub(crate) async fn delivery_limit(cluster: &Cluster, group: &str) -> DeliveryLimit {
    let default =
        |why: String| DeliveryLimit { limit: KAFKA_DEFAULT_DELIVERY_LIMIT, source: format!("Kafka's default ({why})") };
    let Some(version) = cluster.versions.served::<DescribeConfigsRequest>() else {
        return default("the broker does not serve DescribeConfigs".into());
    };
    let Some(node) = cluster.any_broker() else {
        return default("no broker known".into());
    };
    let resource = |kind, name: String, key: &'static str| {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str(key)]))
    };
    let request = DescribeConfigsRequest::default().with_resources(vec![
        resource(RESOURCE_GROUP, group.to_string(), GROUP_KEY),
        resource(RESOURCE_BROKER, node.to_string(), BROKER_KEY),
    ]);
    let reply = match cluster.broker(node).await {
        Ok(conn) => conn.send(&request, version, cluster.timeout).await,
        Err(e) => Err(e),
    };
    match reply {
        Ok(reply) => from_reply(&reply).unwrap_or_else(|| default("neither the group nor the broker names one".into())),
        Err(e) => default(format!("DescribeConfigs failed: {e}")),
    }
}

const RESET_KEY: &str = "share.auto.offset.reset";
/// DescribeConfigs' `config_source` of a config set on the group itself.
const SOURCE_GROUP_CONFIG: i8 = 8;
/// IncrementalAlterConfigs' SET operation.
const OPERATION_SET: i8 = 0;

/// Makes a new share group start at `reset` (`earliest`, `latest` or
/// `by_duration:<ISO-8601>`), as a Kafka Connect sink task's consumer does
/// with `auto.offset.reset` (earliest unless overridden): a share group's own
/// default, latest, would skip every record written before the group first
/// fetched each partition. Applied as the group's `share.auto.offset.reset`
/// before the join, and only where the group has no such config of its own
/// (an operator's setting stands). Answers what was done, for the log; a
/// broker that refuses (no group configs, no ALTER_CONFIGS right) leaves the
/// broker's default in force, and says so.
pub(crate) async fn start_position(cluster: &Cluster, group: &str, reset: &str) -> String {
    let (Some(describe), Some(alter)) = (
        cluster.versions.served::<DescribeConfigsRequest>(),
        cluster.versions.served::<IncrementalAlterConfigsRequest>(),
    ) else {
        return "left to the broker: it serves no group configs".into();
    };
    let Some(node) = cluster.any_broker() else {
        return "left to the broker: no broker known".into();
    };
    let conn = match cluster.broker(node).await {
        Ok(conn) => conn,
        Err(e) => return format!("left to the broker: {e}"),
    };
    let request = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_GROUP)
            .with_resource_name(StrBytes::from_string(group.to_string()))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str(RESET_KEY)])),
    ]);
    match conn.send(&request, describe, cluster.timeout).await {
        Ok(reply) => {
            if let Some(own) = group_config(&reply, RESET_KEY) {
                return format!("the group's own {RESET_KEY}={own}");
            }
        }
        Err(e) => return format!("left to the broker: DescribeConfigs failed: {e}"),
    }
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(RESOURCE_GROUP)
            .with_resource_name(StrBytes::from_string(group.to_string()))
            .with_configs(vec![
                AlterableConfig::default()
                    .with_name(StrBytes::from_static_str(RESET_KEY))
                    .with_config_operation(OPERATION_SET)
                    .with_value(Some(StrBytes::from_string(reset.to_string()))),
            ]),
    ]);
    let reply: Result<IncrementalAlterConfigsResponse, _> = conn.send(&request, alter, cluster.timeout).await;
    match reply.map(|r| r.responses.into_iter().next()) {
        Ok(Some(result)) if result.error_code == 0 => format!("{RESET_KEY}={reset}, set on the group"),
        Ok(Some(result)) => format!(
            "left to the broker: setting {RESET_KEY}={reset} on the group failed with error {}{}",
            result.error_code,
            result.error_message.map(|m| format!(" ({})", m.as_str())).unwrap_or_default()
        ),
        Ok(None) => "left to the broker: IncrementalAlterConfigs answered nothing".into(),
        Err(e) => format!("left to the broker: IncrementalAlterConfigs failed: {e}"),
    }
}

/// Sets the connector's `configs` on its share group (one
/// IncrementalAlterConfigs, before the join). The connector asked for them,
/// so a broker that refuses (a value outside its bounds, no ALTER_CONFIGS
/// right on the group, no group configs at all) fails the task with its
/// words rather than leaving the broker's default in silence.
pub(crate) async fn set_group_configs(
    cluster: &Cluster,
    group: &str,
    configs: &BTreeMap<String, String>,
) -> Result<(), ShareError> {
    if configs.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let refused =
        |why: String| ShareError::Config(format!("setting {} on share group {group} failed: {why}", named.join(", ")));
    let Some(alter) = cluster.versions.served::<IncrementalAlterConfigsRequest>() else {
        return Err(refused("the broker serves no IncrementalAlterConfigs (no group configs)".into()));
    };
    let node = cluster.any_broker().ok_or_else(|| refused("no broker known".into()))?;
    let conn = cluster.broker(node).await?;
    let alterable = configs.iter().map(|(key, value)| {
        AlterableConfig::default()
            .with_name(StrBytes::from_string(key.clone()))
            .with_config_operation(OPERATION_SET)
            .with_value(Some(StrBytes::from_string(value.clone())))
    });
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(RESOURCE_GROUP)
            .with_resource_name(StrBytes::from_string(group.to_string()))
            .with_configs(alterable.collect()),
    ]);
    let reply: IncrementalAlterConfigsResponse = conn.send(&request, alter, cluster.timeout).await?;
    match reply.responses.first() {
        Some(result) if result.error_code == 0 => Ok(()),
        Some(result) => {
            let error = ResponseError::try_from_code(result.error_code)
                .map_or_else(|| format!("error {}", result.error_code), |e| format!("{e:?}"));
            let message = result.error_message.as_ref().map(|m| format!(": {}", m.as_str())).unwrap_or_default();
            Err(refused(format!("{error}{message}")))
        }
        None => Err(refused("IncrementalAlterConfigs answered nothing".into())),
    }
}

/// The group's `keys` as the broker has them once those `set` read back as
/// set: a broker applies a group config through the controller's metadata,
/// so one asked at once may still answer the old value for a moment. After
/// a few seconds, what it answers then.
pub(crate) async fn settled_group_configs(
    cluster: &Cluster,
    group: &str,
    keys: &[&str],
    set: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut tries = 20;
    loop {
        let configs = group_configs(cluster, group, keys).await;
        tries -= 1;
        if tries == 0 || set.iter().all(|(key, value)| configs.get(key) == Some(value)) {
            return configs;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// The group's `keys` as the broker now has them (its own, or the broker's
/// defaults), for the task's status: what was set, read back.
async fn group_configs(cluster: &Cluster, group: &str, keys: &[&str]) -> BTreeMap<String, String> {
    let Some(describe) = cluster.versions.served::<DescribeConfigsRequest>() else {
        return BTreeMap::new();
    };
    let Some(node) = cluster.any_broker() else {
        return BTreeMap::new();
    };
    let request = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_GROUP)
            .with_resource_name(StrBytes::from_string(group.to_string()))
            .with_configuration_keys(Some(keys.iter().map(|k| StrBytes::from_string(k.to_string())).collect())),
    ]);
    let reply = match cluster.broker(node).await {
        Ok(conn) => conn.send(&request, describe, cluster.timeout).await,
        Err(e) => Err(e),
    };
    let Ok(reply) = reply else { return BTreeMap::new() };
    let Some(result) = reply.results.iter().find(|r| r.resource_type == RESOURCE_GROUP && r.error_code == 0) else {
        return BTreeMap::new();
    };
    result
        .configs
        .iter()
        .filter_map(|c| Some((c.name.as_str().to_string(), c.value.as_ref()?.as_str().to_string())))
        .collect()
}

/// The value of `key` where the group itself sets it (not a default).
fn group_config(reply: &DescribeConfigsResponse, key: &str) -> Option<String> {
    let result = reply.results.iter().find(|r| r.resource_type == RESOURCE_GROUP && r.error_code == 0)?;
    let config = result.configs.iter().find(|c| c.name.as_str() == key && c.config_source == SOURCE_GROUP_CONFIG)?;
    Some(config.value.as_ref()?.as_str().to_string())
}

/// The limit a reply names, and where it comes from: the group's own config
/// first; a group value of another source is only a default the broker's
/// config decides, so the broker's config is named instead where it answered.
fn from_reply(reply: &DescribeConfigsResponse) -> Option<DeliveryLimit> {
    let config = |kind: i8, key: &str| {
        let result = reply.results.iter().find(|r| r.resource_type == kind && r.error_code == 0)?;
        let config = result.configs.iter().find(|c| c.name.as_str() == key)?;
        let limit = config.value.as_ref()?.as_str().trim().parse::<u16>().ok().filter(|v| *v > 0)?;
        Some((limit, config.config_source))
    };
    let group = config(RESOURCE_GROUP, GROUP_KEY);
    match (group, config(RESOURCE_BROKER, BROKER_KEY)) {
        (Some((limit, SOURCE_GROUP_CONFIG)), _) => {
            Some(DeliveryLimit { limit, source: format!("group config {GROUP_KEY}") })
        }
        (_, Some((limit, _))) => Some(DeliveryLimit { limit, source: format!("broker config {BROKER_KEY}") }),
        (Some((limit, _)), None) => Some(DeliveryLimit { limit, source: format!("the group's default {GROUP_KEY}") }),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};

    /// DescribeConfigs' `config_source` of a default value.
    const SOURCE_DEFAULT: i8 = 5;

    fn result(kind: i8, error: i16, key: &str, value: &str) -> DescribeConfigsResult {
        result_from(kind, error, key, value, if kind == RESOURCE_GROUP { SOURCE_GROUP_CONFIG } else { SOURCE_DEFAULT })
    }

    fn result_from(kind: i8, error: i16, key: &str, value: &str, source: i8) -> DescribeConfigsResult {
        DescribeConfigsResult::default().with_resource_type(kind).with_error_code(error).with_configs(vec![
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_string(key.into()))
                .with_value(Some(StrBytes::from_string(value.into())))
                .with_config_source(source),
        ])
    }

    #[test]
    fn the_group_config_wins_over_the_brokers() {
        let reply = DescribeConfigsResponse::default()
            .with_results(vec![result(RESOURCE_GROUP, 0, GROUP_KEY, "3"), result(RESOURCE_BROKER, 0, BROKER_KEY, "7")]);
        let limit = from_reply(&reply).unwrap();
        assert_eq!((limit.limit, limit.source.as_str()), (3, "group config share.delivery.count.limit"));
    }

    #[test]
    fn a_group_default_is_not_called_the_groups_config() {
        let group_default = result_from(RESOURCE_GROUP, 0, GROUP_KEY, "7", SOURCE_DEFAULT);
        let reply = DescribeConfigsResponse::default()
            .with_results(vec![group_default.clone(), result(RESOURCE_BROKER, 0, BROKER_KEY, "7")]);
        let limit = from_reply(&reply).unwrap();
        assert_eq!((limit.limit, limit.source.as_str()), (7, "broker config group.share.delivery.count.limit"));
        // The broker's own config not readable: the group's default, said so.
        let reply = DescribeConfigsResponse::default()
            .with_results(vec![group_default, result(RESOURCE_BROKER, 29, BROKER_KEY, "7")]);
        let limit = from_reply(&reply).unwrap();
        assert_eq!((limit.limit, limit.source.as_str()), (7, "the group's default share.delivery.count.limit"));
    }

    #[test]
    fn a_failed_group_lookup_falls_back_to_the_broker() {
        // 35: UNSUPPORTED_VERSION, as a broker without group configs answers.
        let reply = DescribeConfigsResponse::default().with_results(vec![
            result(RESOURCE_GROUP, 35, GROUP_KEY, "3"),
            result(RESOURCE_BROKER, 0, BROKER_KEY, "7"),
        ]);
        let limit = from_reply(&reply).unwrap();
        assert_eq!((limit.limit, limit.source.as_str()), (7, "broker config group.share.delivery.count.limit"));
        assert_eq!(from_reply(&DescribeConfigsResponse::default()), None);
    }
}
