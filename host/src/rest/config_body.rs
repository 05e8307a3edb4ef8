//! Connector configs as request bodies: JSON objects whose values Connect
//! reads as strings (Jackson coerces numbers and booleans, so we do too).

use super::error::{ApiError, ApiResult};
use crate::herder::ConfigMap;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A scalar as the string Connect would see; `None` for JSON null.
fn scalar(key: &str, value: Value) -> ApiResult<Option<String>> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        Value::Bool(b) => Ok(Some(b.to_string())),
        Value::Number(n) => Ok(Some(n.to_string())),
        Value::Array(_) | Value::Object(_) => {
            Err(ApiError::bad_request(format!("Config value of '{key}' must be a string, not an array or object")))
        }
    }
}

fn object(value: Value, what: &str) -> ApiResult<Map<String, Value>> {
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(ApiError::bad_request(format!("{what} must be a JSON object of strings"))),
    }
}

/// A full config. A null value is the same as leaving the key out.
pub fn config_map(value: Value) -> ApiResult<ConfigMap> {
    let mut config = ConfigMap::new();
    for (key, value) in object(value, "The connector config")? {
        if let Some(s) = scalar(&key, value)? {
            config.insert(key, s);
        }
    }
    Ok(config)
}

/// A config patch (`PATCH …/config`): null removes the key.
pub fn config_patch(value: Value) -> ApiResult<BTreeMap<String, Option<String>>> {
    object(value, "The config patch")?.into_iter().map(|(key, value)| Ok((key.clone(), scalar(&key, value)?))).collect()
}

/// Connect's rule: a `name` in the config must equal the connector's name;
/// when absent it is filled in.
pub fn check_and_put_name(name: &str, config: &mut ConfigMap) -> ApiResult<()> {
    match config.get("name") {
        Some(included) if included != name => Err(ApiError::bad_request(format!(
            "Connector name configuration ({included}) doesn't match connector name in the URL ({name})"
        ))),
        Some(_) => Ok(()),
        None => {
            config.insert("name".into(), name.into());
            Ok(())
        }
    }
}

/// Names must be non-empty and free of control characters (Connect's
/// `NonEmptyStringWithoutControlChars`); they end up in paths, files and logs.
pub fn check_connector_name(name: &str) -> ApiResult<()> {
    if name.trim().is_empty() {
        return Err(ApiError::bad_request("Connector name must not be empty"));
    }
    if name.chars().any(char::is_control) {
        return Err(ApiError::bad_request("Connector name must not contain control characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_become_strings_and_null_means_absent() {
        let config = config_map(json!({"tasks.max": 2, "flag": true, "topics": "t", "gone": null})).unwrap();
        assert_eq!(
            config,
            [("flag", "true"), ("tasks.max", "2"), ("topics", "t")].map(|(k, v)| (k.into(), v.into())).into()
        );
        assert_eq!(config_map(json!({"k": {"nested": 1}})).unwrap_err().status, 400);
        assert_eq!(config_map(json!(["not", "an", "object"])).unwrap_err().status, 400);
    }

    #[test]
    fn patch_keeps_nulls_as_removals() {
        let patch = config_patch(json!({"a": "1", "b": null})).unwrap();
        assert_eq!(patch.get("a"), Some(&Some("1".to_string())));
        assert_eq!(patch.get("b"), Some(&None));
    }

    #[test]
    fn included_name_must_match() {
        let mut config = ConfigMap::new();
        check_and_put_name("c", &mut config).unwrap();
        assert_eq!(config["name"], "c");
        assert!(check_and_put_name("other", &mut config).is_err());
        assert!(check_connector_name(" ").is_err());
        assert!(check_connector_name("a\nb").is_err());
        assert!(check_connector_name("ok-name").is_ok());
    }
}
