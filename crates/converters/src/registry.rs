//! The Schema Registry, as Confluent's serializers use it: a schema fetched
//! by id (`GET /schemas/ids/{id}`) the first time a record names it, then
//! kept (a schema id never changes meaning).

use super::ConvertError;
use super::avro::AvroSchema;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// Where the registry is and who we are to it: a converter's
/// `schema.registry.url` and `basic.auth.user.info`.
#[derive(Clone, Debug, PartialEq)]
pub struct RegistryConfig {
    pub url: String,
    /// `user:password`, sent as HTTP basic authentication.
    pub user_info: Option<String>,
}

pub struct Registry {
    config: RegistryConfig,
    client: reqwest::Client,
    schemas: Mutex<HashMap<u32, Arc<AvroSchema>>>,
}

/// How long one request to the registry may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

impl Registry {
    pub fn new(config: RegistryConfig) -> Result<Registry, String> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            // A registry answers where it is; a redirect could lead the host
            // somewhere the operator's policy never saw.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("a client for the schema registry: {e}"))?;
        Ok(Registry { config, client, schemas: Mutex::new(HashMap::new()) })
    }

    /// The writer's schema of id `id`.
    pub async fn schema(&self, id: u32) -> Result<Arc<AvroSchema>, ConvertError> {
        let mut schemas = self.schemas.lock().await;
        if let Some(schema) = schemas.get(&id) {
            return Ok(schema.clone());
        }
        let schema = Arc::new(self.fetch(id).await?);
        schemas.insert(id, schema.clone());
        Ok(schema)
    }

    async fn fetch(&self, id: u32) -> Result<AvroSchema, ConvertError> {
        let url = format!("{}/schemas/ids/{id}", self.config.url.trim_end_matches('/'));
        let mut request = self.client.get(&url).header("accept", "application/vnd.schemaregistry.v1+json");
        if let Some((user, password)) = self.config.user_info.as_deref().and_then(|u| u.split_once(':')) {
            request = request.basic_auth(user, Some(password));
        }
        // An error may name the URL: the connector's key refuses one with
        // credentials in it.
        let unavailable = |e: &dyn std::fmt::Display| ConvertError::Registry(format!("schema registry at {url}: {e}"));
        let response = request.send().await.map_err(|e| unavailable(&e.without_url()))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| unavailable(&e.without_url()))?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(ConvertError::Record(format!("schema id {id} is unknown to the schema registry")));
        }
        if !status.is_success() {
            // Only a registry's own error is quoted: the URL is the
            // connector's, and any other server's page is none of its business.
            let said =
                serde_json::from_str::<RegistryError>(&body).map(|e| format!(" ({}: {})", e.error_code, e.message));
            let said: String = said.unwrap_or_default().chars().take(200).collect();
            return Err(unavailable(&format!("{status}{said}")));
        }
        let answer: SchemaAnswer =
            serde_json::from_str(&body).map_err(|e| unavailable(&format!("an answer that is not a schema ({e})")))?;
        if answer.schema_type.as_deref().is_some_and(|t| t != "AVRO") {
            let kind = answer.schema_type.unwrap_or_default();
            return Err(ConvertError::Record(format!(
                "schema id {id} is a {kind} schema; value.converter/key.converter is AvroConverter"
            )));
        }
        if !answer.references.is_empty() {
            return Err(ConvertError::Record(format!(
                "schema id {id} refers to other subjects' schemas, which Spillway does not read yet"
            )));
        }
        AvroSchema::parse(&answer.schema).map_err(|e| ConvertError::Record(format!("schema id {id}: {e}")))
    }
}

/// `GET /schemas/ids/{id}`'s answer.
#[derive(serde::Deserialize)]
struct SchemaAnswer {
    schema: String,
    /// Absent for Avro.
    #[serde(rename = "schemaType")]
    schema_type: Option<String>,
    #[serde(default)]
    references: Vec<serde_json::Value>,
}

/// A Schema Registry's error answer.
#[derive(serde::Deserialize)]
struct RegistryError {
    error_code: i64,
    message: String,
}
