"""The shared tiny case's files describe its objects: tests that run the CLI on the files and tests that call
the API with the objects are about the same model and space."""
from phaze.hardware.space import load_space
from phaze.workload.zoo import load_model_file
from tinysearch import MODEL_YAML, SPACE, SPACE_YAML, TINY


def test_the_yaml_files_load_as_the_objects(tmp_path):
    (tmp_path / "m.yaml").write_text(MODEL_YAML)
    (tmp_path / "s.yaml").write_text(SPACE_YAML)
    assert load_model_file(tmp_path / "m.yaml") == TINY
    assert load_space(tmp_path / "s.yaml") == SPACE
