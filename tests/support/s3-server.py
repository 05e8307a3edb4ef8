#!/usr/bin/env python3
"""An S3-compatible server for the tests: moto in server mode on 127.0.0.1.

    s3-server.py serve FILE            start on a free port, write its endpoint
                                       to FILE, and run until stdin closes (the
                                       test process that started it ended)
    s3-server.py serve-with-auth FILE  the same, but checking credentials (moto's
                                       IAM mode): FILE gets the endpoint, then
                                       the only access key id and secret it
                                       accepts, one a line
    s3-server.py create-bucket ENDPOINT NAME
                                       create a bucket on any S3-compatible
                                       server (keys from AWS_ACCESS_KEY_ID /
                                       AWS_SECRET_ACCESS_KEY, else test keys)
    s3-server.py list-uploads ENDPOINT NAME
                                       print the keys of the bucket's
                                       multipart uploads in progress, one a line
"""
import os
import sys


def serve(endpoint_file, auth=False):
    if auth:
        # Requests after the first three (creating the user, its policy and
        # its key) must be signed with a key moto's IAM knows.
        os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    lines = [endpoint]
    if auth:
        iam = client(endpoint, "iam")
        iam.create_user(UserName="spillway")
        policy = '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}'
        iam.put_user_policy(UserName="spillway", PolicyName="all", PolicyDocument=policy)
        key = iam.create_access_key(UserName="spillway")["AccessKey"]
        lines += [key["AccessKeyId"], key["SecretAccessKey"]]
    tmp = endpoint_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.rename(tmp, endpoint_file)
    sys.stdin.read()  # EOF when the test process ends, however it ends
    server.stop()


def client(endpoint, service="s3"):
    import boto3

    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
    )


def create_bucket(endpoint, name):
    client(endpoint).create_bucket(Bucket=name)


def list_uploads(endpoint, name):
    for upload in client(endpoint).list_multipart_uploads(Bucket=name).get("Uploads", []):
        print(upload["Key"])


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"] and len(sys.argv) == 3:
        serve(sys.argv[2])
    elif sys.argv[1:2] == ["serve-with-auth"] and len(sys.argv) == 3:
        serve(sys.argv[2], auth=True)
    elif sys.argv[1:2] == ["create-bucket"] and len(sys.argv) == 4:
        create_bucket(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["list-uploads"] and len(sys.argv) == 4:
        list_uploads(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
