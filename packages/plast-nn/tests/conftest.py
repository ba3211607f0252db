import sys
from pathlib import Path

# the repo's shared test tooling (tests/tooling: the fake CUDA driver, the tiny BERT model), which ships in no wheel
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "tooling"))
