"""The Stable Diffusion sample container: its server (sd_server, run in the image as
`python3 -m sd_server serve`), the model builder that makes its model data, and its GPU check."""
