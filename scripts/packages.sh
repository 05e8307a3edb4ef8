# The packages README's test command builds and tests, in one list: the
# benchmarks build the same set, since another set unifies features
# differently and would build the host a second time. Sourced.
PACKAGES=(-p spillway -p spillway-sdk -p spillway-record -p spillway-config -p spillway-policy -p spillway-kafka
  -p spillway-capabilities -p spillway-runtime -p spillway-connector -p spillway-task -p spillway-converters -p spillway-transforms -p s3-sink -p sql-sink -p mirror -p rust-redact)
