#!/usr/bin/env bash
# An endpoint's whole life with the AWS CLI v1 (`pip install awscli`) against smlocal:
#
#   smlocal serve --port 8090 &
#   bash docs/examples/aws_cli_endpoint.sh http://127.0.0.1:8090 my-model:latest model.tar.gz \
#       [NAME] [BODY_FILE] [CONTENT_TYPE]
#
# Set-up (docs/quickstart-aws-cli.md): any access key and secret (AWS_ACCESS_KEY_ID=smlocal ...), a
# region (AWS_DEFAULT_REGION=us-east-1), --endpoint-url on every command, and for waits that poll
# every second instead of every 30 s, AWS_DATA_PATH made by aws_cli_quick_waiters.py.
set -euo pipefail
url=$1 image=$2 model_data=$3 name=${4:-cli-demo} body=${5:-} content_type=${6:-application/json}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$body" ]; then
    body=$work/body.json
    printf '{"inputs": [1, 2, 3]}' > "$body"
fi
sm() { aws --endpoint-url "$url" sagemaker "$@"; }

# `smlocal serve ... &` returns before the server listens: wait until it answers (SERVER_WAIT_S,
# 30 s by default); one that never does ends the script with the CLI's error.
deadline=$((SECONDS + ${SERVER_WAIT_S:-30}))
until sm list-endpoints --max-results 1 > /dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then sm list-endpoints --max-results 1 > /dev/null; fi
    sleep 0.5
done

# The model data: a local model.tar.gz (or a folder) as a file:// URL; s3:// works as on AWS.
model_url="file://$(realpath "$model_data")"
sm create-model --model-name "$name" --primary-container "Image=$image,ModelDataUrl=$model_url" \
    --execution-role-arn arn:aws:iam::123456789012:role/smlocal --query ModelArn --output text
sm create-endpoint-config --endpoint-config-name "$name" --query EndpointConfigArn --output text \
    --production-variants "VariantName=AllTraffic,ModelName=$name,InitialInstanceCount=1,InstanceType=ml.m5.large"
sm create-endpoint --endpoint-name "$name" --endpoint-config-name "$name" --query EndpointArn --output text
sm wait endpoint-in-service --endpoint-name "$name"
sm describe-endpoint --endpoint-name "$name" --query EndpointStatus --output text
sm describe-model --model-name "$name" --query PrimaryContainer.ModelDataUrl --output text

# --content-type says what the body is (JSON here), as your model reads it; --accept what to answer.
# The answer's body goes to a file (the last argument); the command prints the headers as JSON.
aws --endpoint-url "$url" sagemaker-runtime invoke-endpoint --endpoint-name "$name" \
    --content-type "$content_type" --accept "$content_type" \
    --body "fileb://$body" "$work/answer.bin" --query ContentType --output text
echo "answer sha256 $(sha256sum < "$work/answer.bin" | cut -d' ' -f1)"

sm list-endpoints --name-contains "$name" --query 'Endpoints[].[EndpointName,EndpointStatus]' --output text
sm delete-endpoint --endpoint-name "$name"
sm wait endpoint-deleted --endpoint-name "$name"
sm delete-endpoint-config --endpoint-config-name "$name"
sm delete-model --model-name "$name"
echo "deleted $name"
