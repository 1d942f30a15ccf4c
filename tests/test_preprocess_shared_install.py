"""A group-writable install's WordNet data: nltk refuses it, and the user is told which file and how to fix it
(hostile pass XIX-zc, NC1: exit 3 "internal error … PermissionError")."""
import shutil

import pytest

from topicaudit.errors import UserError
from topicaudit.inputs import preprocess


def test_a_group_writable_wordnet_is_a_user_error_naming_the_fix(tmp_path, monkeypatch):
    shared = tmp_path / "_data"
    shared.mkdir()
    data = shared / preprocess.WORDNET_ZIP.name
    shutil.copyfile(preprocess.WORDNET_ZIP, data)
    data.chmod(0o664)  # as extracted under umask 002
    monkeypatch.setattr(preprocess, "DATA_DIR", shared)
    monkeypatch.setattr(preprocess, "WORDNET_ZIP", data)
    with pytest.raises(UserError, match=r"chmod go-w .*wordnet-3\.0-lemmatizer\.zip"):
        preprocess._build_lemmatizer()
    data.chmod(0o644)
    assert preprocess._build_lemmatizer().lemmatize("dogs") == "dog"
