"""SageMaker's endpoint metrics (catalogue, periods, statistics, the store, the JSON and Prometheus
views, the sampler) and CloudWatch over them (metric queries, metric alarms, `alarms.json`). Below
scaling: alarm actions reach the autoscaler through `alarms.AlarmActions`."""
