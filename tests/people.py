"""Users with a role, for page and permission tests."""

from django.contrib.auth.models import User

from annotation.models import Physician


def person(username: str, role: str, **profile) -> User:
    user = User.objects.create_user(username, password="pw-" + username)
    Physician.objects.create(user=user, role=role, **profile)
    return user
