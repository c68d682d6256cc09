"""Kept for tests written against this path: the factory is bench.kit.profiles.make_profile
(keyword arguments) and the Azure conv profile is tests.helpers.shared_data's."""

from bench.kit.profiles import make_profile
from tests.helpers.shared_data import AZURE_CONV, azure_conv_profile

__all__ = ["AZURE_CONV", "azure_conv_profile", "make_profile"]
