"""SageMaker hosting instance types: what a container of each really gets (one table, used everywhere).

Every type of botocore's `ProductionVariantInstanceType` enum has a row: vCPUs, memory (GiB, as EC2
counts it: 2**30 bytes), accelerators (how many, of which kind and model) and the CPU architecture.
Sources: the EC2 instance-type specifications (https://aws.amazon.com/ec2/instance-types/ and each
family's page) and SageMaker's pricing page (https://aws.amazon.com/sagemaker/pricing/), which lists
the ml.* variants with the same vCPU and memory figures. Rows marked `[U]` were not confirmed against
a published page (the ml.g7 line, NVIDIA RTX PRO 4500 Blackwell: its vCPU and memory figures): they
follow the family's sibling and are a design decision, kept here so that one edit corrects them.

`lookup(name)` answers None for a name the table does not know (a newer botocore's type): callers then
apply no limits and say so. tests/unit/test_instance_types.py keeps the table equal to the installed
botocore's enum.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Architecture(enum.StrEnum):
    """The CPU architecture of an instance, in the OCI image config's words (`docker inspect`'s
    `.Architecture`)."""

    X86_64 = "amd64"
    ARM64 = "arm64"


class AcceleratorKind(enum.StrEnum):
    NVIDIA_GPU = "nvidia-gpu"  # CUDA devices: given to a container through Docker's device requests
    NEURON = "aws-neuron"  # AWS Inferentia / Trainium (inf*, trn*): /dev/neuron*, not modelled
    GAUDI = "habana-gaudi"  # dl1: Habana Gaudi, not modelled


@dataclass(frozen=True)
class InstanceType:
    """One hosting instance type, as the container sees the machine it runs on."""

    name: str
    vcpus: int
    memory_gib: float
    architecture: Architecture = Architecture.X86_64
    accelerators: int = 0
    accelerator_kind: AcceleratorKind | None = None
    #: The accelerator's model, as AWS names it ("NVIDIA A10G", "AWS Inferentia2", ...).
    accelerator_model: str | None = None
    #: [U]: figures not confirmed against a published page (see the module's docstring).
    unconfirmed: bool = False

    @property
    def family(self) -> str:
        """`ml.g5.xlarge` -> `g5`."""
        return self.name.split(".")[1]

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * 2**30)

    @property
    def gpus(self) -> int:
        """NVIDIA GPUs a container of this type is given (0 for CPU, Inferentia, Trainium, Gaudi)."""
        return self.accelerators if self.accelerator_kind is AcceleratorKind.NVIDIA_GPU else 0

    def describe(self) -> str:
        """`ml.g5.xlarge (4 vCPUs, 16 GiB, 1 NVIDIA A10G, amd64)`, for logs and reports."""
        parts = [f"{self.vcpus} vCPUs", f"{self.memory_gib:g} GiB"]
        if self.accelerators:
            parts.append(f"{self.accelerators} {self.accelerator_model}")
        parts.append(self.architecture.value)
        return f"{self.name} ({', '.join(parts)})"


# vCPUs by size where the family follows EC2's usual rule (large 2, xlarge 4, Nxlarge 4N).
def _vcpus(size: str) -> int:
    if size == "medium":
        return 1
    if size == "large":
        return 2
    if size == "xlarge":
        return 4
    return 4 * int(size.removesuffix("xlarge"))


# CPU families: `family arch GiB-per-vCPU sizes...` (a size=V/M entry overrides the rule's figures).
_CPU_FAMILIES = """
c4    amd64 1.875 large xlarge 2xlarge 4xlarge 8xlarge=36/60
c5    amd64 2     large xlarge 2xlarge 4xlarge 9xlarge 18xlarge
c5d   amd64 2     large xlarge 2xlarge 4xlarge 9xlarge 18xlarge
c6g   arm64 2     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge
c6gd  arm64 2     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge
c6gn  arm64 2     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge
c6i   amd64 2     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge
c6in  amd64 2     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge
c7g   arm64 2     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge
c7i   amd64 2     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge
c8g   arm64 2     medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge
m4    amd64 4     xlarge 2xlarge 4xlarge 10xlarge 16xlarge
m5    amd64 4     large xlarge 2xlarge 4xlarge 12xlarge 24xlarge
m5d   amd64 4     large xlarge 2xlarge 4xlarge 12xlarge 24xlarge
m6g   arm64 4     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge
m6gd  arm64 4     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge
m6i   amd64 4     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge
m7i   amd64 4     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge
m8g   arm64 4     medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge
r5    amd64 8     large xlarge 2xlarge 4xlarge 12xlarge 24xlarge
r5d   amd64 8     large xlarge 2xlarge 4xlarge 12xlarge 24xlarge
r6g   arm64 8     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge
r6gd  arm64 8     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge
r6i   amd64 8     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge
r7gd  arm64 8     medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge
r7i   amd64 8     large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge
r8g   arm64 8     medium large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge
t2    amd64 4     medium=2/4 large=2/8 xlarge 2xlarge
"""

# Accelerated families: `family arch kind model sizes...`, each size=vCPUs/GiB/accelerators (a family
# may take several lines; `?` after it: [U], figures unconfirmed).
_ACCELERATED_FAMILIES = """
g4dn      amd64 nvidia-gpu   NVIDIA_T4 xlarge=4/16/1 2xlarge=8/32/1 4xlarge=16/64/1 8xlarge=32/128/1
g4dn      amd64 nvidia-gpu   NVIDIA_T4 12xlarge=48/192/4 16xlarge=64/256/1
g5        amd64 nvidia-gpu   NVIDIA_A10G xlarge=4/16/1 2xlarge=8/32/1 4xlarge=16/64/1 8xlarge=32/128/1
g5        amd64 nvidia-gpu   NVIDIA_A10G 12xlarge=48/192/4 16xlarge=64/256/1 24xlarge=96/384/4
g5        amd64 nvidia-gpu   NVIDIA_A10G 48xlarge=192/768/8
g6        amd64 nvidia-gpu   NVIDIA_L4 xlarge=4/16/1 2xlarge=8/32/1 4xlarge=16/64/1 8xlarge=32/128/1
g6        amd64 nvidia-gpu   NVIDIA_L4 12xlarge=48/192/4 16xlarge=64/256/1 24xlarge=96/384/4
g6        amd64 nvidia-gpu   NVIDIA_L4 48xlarge=192/768/8
g6e       amd64 nvidia-gpu   NVIDIA_L40S xlarge=4/32/1 2xlarge=8/64/1 4xlarge=16/128/1 8xlarge=32/256/1
g6e       amd64 nvidia-gpu   NVIDIA_L40S 12xlarge=48/384/4 16xlarge=64/512/1 24xlarge=96/768/4
g6e       amd64 nvidia-gpu   NVIDIA_L40S 48xlarge=192/1536/8
g7e       amd64 nvidia-gpu   NVIDIA_RTX_PRO_6000_Blackwell 2xlarge=8/64/1 4xlarge=16/128/1
g7e       amd64 nvidia-gpu   NVIDIA_RTX_PRO_6000_Blackwell 8xlarge=32/256/1 12xlarge=48/512/2
g7e       amd64 nvidia-gpu   NVIDIA_RTX_PRO_6000_Blackwell 24xlarge=96/1024/4 48xlarge=192/2048/8
g7?       amd64 nvidia-gpu   NVIDIA_RTX_PRO_4500_Blackwell 2xlarge=8/32/1 4xlarge=16/64/1 8xlarge=32/128/1
g7?       amd64 nvidia-gpu   NVIDIA_RTX_PRO_4500_Blackwell 12xlarge=48/192/2 24xlarge=96/384/4
g7?       amd64 nvidia-gpu   NVIDIA_RTX_PRO_4500_Blackwell 48xlarge=192/768/8
p2        amd64 nvidia-gpu   NVIDIA_K80 xlarge=4/61/1 8xlarge=32/488/8 16xlarge=64/732/16
p3        amd64 nvidia-gpu   NVIDIA_V100 2xlarge=8/61/1 8xlarge=32/244/4 16xlarge=64/488/8
p4d       amd64 nvidia-gpu   NVIDIA_A100 24xlarge=96/1152/8
p4de      amd64 nvidia-gpu   NVIDIA_A100_80GB 24xlarge=96/1152/8
p5        amd64 nvidia-gpu   NVIDIA_H100 4xlarge=16/256/1 48xlarge=192/2048/8
p5e       amd64 nvidia-gpu   NVIDIA_H200 48xlarge=192/2048/8
p5en      amd64 nvidia-gpu   NVIDIA_H200 48xlarge=192/2048/8
p6-b200   amd64 nvidia-gpu   NVIDIA_B200 48xlarge=192/2048/8
p6-b300   amd64 nvidia-gpu   NVIDIA_B300 48xlarge=192/4096/8
p6e-gb200 arm64 nvidia-gpu   NVIDIA_GB200 36xlarge=144/960/4
dl1       amd64 habana-gaudi Habana_Gaudi 24xlarge=96/768/8
inf1      amd64 aws-neuron   AWS_Inferentia xlarge=4/8/1 2xlarge=8/16/1 6xlarge=24/48/4 24xlarge=96/192/16
inf2      amd64 aws-neuron   AWS_Inferentia2 xlarge=4/16/1 8xlarge=32/128/1 24xlarge=96/384/6
inf2      amd64 aws-neuron   AWS_Inferentia2 48xlarge=192/768/12
trn1      amd64 aws-neuron   AWS_Trainium 2xlarge=8/32/1 32xlarge=128/512/16
trn1n     amd64 aws-neuron   AWS_Trainium 32xlarge=128/512/16
trn2      amd64 aws-neuron   AWS_Trainium2 48xlarge=192/2048/16
"""


def _build() -> dict[str, InstanceType]:
    table: dict[str, InstanceType] = {}
    for line in _CPU_FAMILIES.strip().splitlines():
        family, arch, per_vcpu, *sizes = line.split()
        for entry in sizes:
            size, _, figures = entry.partition("=")
            if figures:
                vcpus, memory = (float(x) for x in figures.split("/"))
            else:
                vcpus = _vcpus(size)
                memory = vcpus * float(per_vcpu)
            name = f"ml.{family}.{size}"
            table[name] = InstanceType(name, int(vcpus), memory, Architecture(arch))
    for line in _ACCELERATED_FAMILIES.strip().splitlines():
        family, arch, kind, model, *sizes = line.split()
        unconfirmed = family.endswith("?")
        family = family.rstrip("?")
        for entry in sizes:
            size, _, figures = entry.partition("=")
            vcpus_s, memory_s, count_s = figures.split("/")
            name = f"ml.{family}.{size}"
            table[name] = InstanceType(
                name,
                int(vcpus_s),
                float(memory_s),
                Architecture(arch),
                int(count_s),
                AcceleratorKind(kind),
                model.replace("_", " "),
                unconfirmed,
            )
    return table


INSTANCE_TYPES: dict[str, InstanceType] = _build()


def lookup(name: str | None) -> InstanceType | None:
    """The row of `name`, or None for a type the table does not know (or no type at all)."""
    return INSTANCE_TYPES.get(name or "")
