"""ARNs and the exact AWS texts built from them. Names in ARNs are lower-cased, as SageMaker does."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Account:
    region: str
    account_id: str

    def arn(self, kind: str, name: str) -> str:
        return f"arn:aws:sagemaker:{self.region}:{self.account_id}:{kind}/{name.lower()}"

    def model_arn(self, name: str) -> str:
        return self.arn("model", name)

    def endpoint_config_arn(self, name: str) -> str:
        return self.arn("endpoint-config", name)

    def endpoint_arn(self, name: str) -> str:
        return self.arn("endpoint", name)

    def inference_component_arn(self, name: str) -> str:
        return self.arn("inference-component", name)

    def log_group(self, endpoint_name: str) -> str:
        return f"/aws/sagemaker/Endpoints/{endpoint_name}"

    def log_group_arn(self, endpoint_name: str) -> str:
        return f"arn:aws:logs:{self.region}:{self.account_id}:log-group:{self.log_group(endpoint_name)}"

    def console_logs_url(self, endpoint_name: str) -> str:
        r = self.region
        return (
            f"https://{r}.console.aws.amazon.com/cloudwatch/home?region={r}"
            f"#logEventViewer:group={self.log_group(endpoint_name)}"
        )
