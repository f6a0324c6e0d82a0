from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from memory.models import Profile


@login_required
def home(request):
    profiles = Profile.objects.for_user(request.user)
    return render(request, "home.html", {"profiles": profiles})
